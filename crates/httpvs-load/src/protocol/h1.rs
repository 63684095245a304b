//! HTTP/1.1 over TCP or TLS (ALPN http/1.1): keep-alive, `--no-keepalive`, and pipelining
//! up to `-m` requests deep. Heads are serialized once per request and responses parsed with
//! httparse from a reused buffer.

mod batch_wake;
mod connection;
mod fast_head;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod head_memo;
mod pending;
mod read_ahead;
mod request_head;
mod response;
mod shared_io;
mod turn_wakers;
mod write_batch;

pub use connection::Http1Connection;
pub use request_head::{ends_in_chunked, same_uri, serialize_head};
pub use response::{
    ends_chunked, names_close, parse_head, parser, unfold, BodyFraming, ChunkedBody, ResponseHead,
};

use super::tcp;
use super::tls::{AlpnConfigs, ALPN_HTTP11};
use super::wire::{PlaintextTaps, WireCounter};
use super::{ConnectInfo, ConnectOptions, Protocol, Target};
use crate::error::ErrorKind;

/// The HTTP/1.1 protocol (h1, and h1 over TLS for https targets).
#[derive(Debug, Default)]
pub struct Http1 {
    tls: AlpnConfigs,
    trace: Option<PlaintextTaps>,
}

impl Http1 {
    /// HTTP/1.1 whose connections show their plaintext to `taps` (`httpvs trace`).
    pub fn with_trace(taps: PlaintextTaps) -> Self {
        Http1 {
            trace: Some(taps),
            ..Http1::default()
        }
    }
}

impl Protocol for Http1 {
    type Conn = Http1Connection;

    fn failure_detail(&self) -> Option<String> {
        tcp::take_connect_note()
    }

    async fn connect(
        &self,
        target: &Target,
        options: &ConnectOptions,
    ) -> Result<(Http1Connection, ConnectInfo), ErrorKind> {
        let tls = tcp::tls_for(target, options, &self.tls, &[ALPN_HTTP11])?;
        let counter = WireCounter::new_shared();
        let (transport, info) =
            tcp::connect(target, tls, options.connect_timeout, counter.clone()).await?;
        // A server may ignore ALPN (None), but must not pick something else.
        if info.alpn.as_deref().is_some_and(|p| p != ALPN_HTTP11) {
            return Err(ErrorKind::Tls);
        }
        let transport = transport.tapped(self.trace.as_ref());
        let conn = Http1Connection::new(transport, counter, options.keepalive, options.streams);
        Ok((conn, info))
    }
}
