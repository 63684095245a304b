//! `-p auto` for https targets: offer h2 and http/1.1 over ALPN and see what the server picks.

use super::tcp;
use super::tls::{AlpnConfigs, ALPN_H2, ALPN_HTTP11};
use super::wire::WireCounter;
use super::{ConnectOptions, ProtocolKind, Target};
use crate::error::ErrorKind;
use tokio::io::AsyncWriteExt;

/// The protocol `-p auto` resolves to: h1 for http targets; for https, h2 when the server
/// selects it over ALPN, else h1 (also when it ignores ALPN). Costs one TLS handshake.
pub async fn probe_alpn(
    target: &Target,
    options: &ConnectOptions,
) -> Result<ProtocolKind, ErrorKind> {
    let configs = AlpnConfigs::default();
    let Some(tls) = tcp::tls_for(target, options, &configs, &[ALPN_H2, ALPN_HTTP11])? else {
        return Ok(ProtocolKind::H1);
    };
    let counter = WireCounter::new_shared();
    let (mut transport, info) =
        tcp::connect(target, Some(tls), options.connect_timeout, counter).await?;
    // close_notify, so the server logs a clean close rather than a reset.
    let _ = transport.shutdown().await;
    Ok(match info.alpn.as_deref() {
        Some(ALPN_H2) => ProtocolKind::H2,
        _ => ProtocolKind::H1,
    })
}
