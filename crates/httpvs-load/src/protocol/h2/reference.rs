//! The reference HTTP/2 client: the `h2` crate behind the same seam as the owned codec.
//! Tests run both on one workload and compare (see `tests/protocol_h2_differential.rs`).

use super::accounting::ConnAccounting;
use super::conn_state::{connection_error_kind, ConnState};
use super::frame_tap::FrameTaps;
use super::reference_connection::ReferenceConnection;
use super::{open_transport, wait_settings};
use crate::error::ErrorKind;
use crate::protocol::tls::AlpnConfigs;
use crate::protocol::window::{H2Windows, ReceiveWindows};
use crate::protocol::wire::{PlaintextTaps, TapIo};
use crate::protocol::{ConnectInfo, ConnectOptions, Protocol, Target};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// HTTP/2 on the `h2` crate (h2c for http targets, h2 for https targets).
#[derive(Debug, Default)]
pub struct Http2Reference {
    tls: AlpnConfigs,
    trace: Option<PlaintextTaps>,
    windows: H2Windows,
}

impl Http2Reference {
    /// The reference client whose connections show their plaintext frames to `taps`.
    pub fn with_trace(taps: PlaintextTaps) -> Self {
        Http2Reference {
            trace: Some(taps),
            ..Http2Reference::default()
        }
    }

    /// The reference client advertising `windows`, as [`super::Http2::with_windows`].
    pub fn with_windows(mut self, windows: ReceiveWindows) -> Self {
        self.windows = windows.h2();
        self
    }
}

impl Protocol for Http2Reference {
    type Conn = ReferenceConnection;

    async fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(ReferenceConnection, ConnectInfo), ErrorKind> {
        let deadline = Instant::now() + options.connect_timeout;
        let (transport, mut info, counter) = open_transport(target, options, &self.tls).await?;
        let state = Arc::new(ConnState::default());
        let (settings_tx, settings_rx) = oneshot::channel();
        let observer = ConnAccounting::new(counter.clone(), state.clone(), settings_tx);
        let io = TapIo::new(
            transport.tapped(self.trace.as_ref()),
            FrameTaps::new(observer),
        );
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(self.windows.stream)
            .initial_connection_window_size(self.windows.connection)
            .enable_push(false)
            .handshake::<_, bytes::Bytes>(io)
            .await
            .map_err(|e| connection_error_kind(&e))?;
        let driver = tokio::spawn(drive(connection, state.clone()));
        let conn = ReferenceConnection::new(sender, state.clone(), counter, driver);
        match wait_settings(deadline, settings_rx).await {
            Some((Ok(max_streams), waited)) => {
                info.server_max_streams = max_streams;
                info.settings = waited.into();
            }
            // The driver ended (and dropped the observer) before the server's SETTINGS.
            Some((Err(_), _)) => {
                let end = state.end().and_then(|end| end.error);
                return Err(end.unwrap_or(ErrorKind::ConnectionClosed));
            }
            None => return Err(ErrorKind::ConnectTimeout),
        }
        Ok((conn, info))
    }
}

/// Runs the connection's I/O until it ends, then records how it ended.
async fn drive<C>(mut connection: C, state: Arc<ConnState>)
where
    C: Future<Output = Result<(), h2::Error>> + Unpin,
{
    // Polled by reference so the result is recorded before the observer (and its SETTINGS
    // sender) is dropped with the connection: connect then sees the real error.
    let result = std::future::poll_fn(|cx| Pin::new(&mut connection).poll(cx)).await;
    state.finish(result);
    drop(connection);
}
