//! HTTP/2: h2c with prior knowledge for http://, TLS with ALPN h2 for https://, on the `h2`
//! crate's client behind the protocol seam (a faster owned codec can replace it here alone).
//!
//! Flow-control windows follow h2load: 2^30-1 for each stream and for the connection, so the
//! client never throttles the server. The server's SETTINGS are awaited during connect, so
//! its MAX_CONCURRENT_STREAMS is known (and honoured by the crate) before the first request.

mod accounting;
mod conn_state;
mod connection;
pub mod frame_tap;
mod request_template;

pub use conn_state::ConnEnd;
pub use connection::{stream_error, Http2Connection};
pub use request_template::build_template;

use super::tcp;
use super::tls::{AlpnConfigs, ALPN_H2};
use super::wire::{PlaintextTaps, TapIo, WireCounter};
use super::{ConnectInfo, ConnectOptions, Protocol, Target};
use crate::error::ErrorKind;
use accounting::ConnAccounting;
use conn_state::{connection_error_kind, ConnState};
use frame_tap::FrameTaps;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// Stream and connection receive windows: h2load's default (`-w 30`, `-W 30`).
pub const RECEIVE_WINDOW: u32 = (1 << 30) - 1;

/// The HTTP/2 protocol (h2c for http targets, h2 for https targets).
#[derive(Debug, Default)]
pub struct Http2 {
    tls: AlpnConfigs,
    trace: Option<PlaintextTaps>,
}

impl Http2 {
    /// HTTP/2 whose connections show their plaintext frames to `taps` (`httpvs trace`).
    pub fn with_trace(taps: PlaintextTaps) -> Self {
        Http2 {
            trace: Some(taps),
            ..Http2::default()
        }
    }
}

impl Protocol for Http2 {
    type Conn = Http2Connection;

    async fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(Http2Connection, ConnectInfo), ErrorKind> {
        let deadline = Instant::now() + options.connect_timeout;
        let tls = tcp::tls_for(target, options, &self.tls, &[ALPN_H2])?;
        let over_tls = tls.is_some();
        let counter = WireCounter::new_shared();
        let (transport, mut info) =
            tcp::connect(target, tls, options.connect_timeout, counter.clone()).await?;
        // Without ALPN h2 the server would read our preface as a bad HTTP/1.1 request.
        if over_tls && info.alpn.as_deref() != Some(ALPN_H2) {
            return Err(ErrorKind::Tls);
        }
        let state = Arc::new(ConnState::default());
        let (settings_tx, settings_rx) = oneshot::channel();
        let observer = ConnAccounting::new(counter.clone(), state.clone(), settings_tx);
        let io = TapIo::new(
            transport.tapped(self.trace.as_ref()),
            FrameTaps::new(observer),
        );
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(RECEIVE_WINDOW)
            .initial_connection_window_size(RECEIVE_WINDOW)
            .enable_push(false)
            .handshake::<_, bytes::Bytes>(io)
            .await
            .map_err(|e| connection_error_kind(&e))?;
        let driver = tokio::spawn(drive(connection, state.clone()));
        let conn = Http2Connection::new(sender, state.clone(), counter, driver);
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, settings_rx).await {
            Ok(Ok(max_streams)) => info.server_max_streams = max_streams,
            // The driver ended (and dropped the observer) before the server's SETTINGS.
            Ok(Err(_)) => {
                let end = state.end().and_then(|end| end.error);
                return Err(end.unwrap_or(ErrorKind::ConnectionClosed));
            }
            Err(_) => return Err(ErrorKind::ConnectTimeout),
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
