//! `-p auto --alt-svc`: one HTTPS request over TCP to read the origin's `Alt-Svc` header, the way
//! a browser learns that a site also speaks HTTP/3.

use super::alt_svc::alt_svc_h3;
use crate::error::ErrorKind;
use crate::protocol::Target;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The UDP port of the same-host `h3` alternative the origin advertises, if any.
///
/// Sends `GET <path>` over TLS with ALPN http/1.1 (`Connection: close`) and reads only the
/// response head; the whole exchange is bounded by `timeout`.
pub async fn discover_h3_port(
    target: &Target,
    uri: &http::Uri,
    tls: &Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> Result<Option<u16>, ErrorKind> {
    tokio::time::timeout(timeout, fetch_alt_svc(target, uri, tls))
        .await
        .unwrap_or(Err(ErrorKind::ConnectTimeout))
}

async fn fetch_alt_svc(
    target: &Target,
    uri: &http::Uri,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Option<u16>, ErrorKind> {
    let mut config = (**tls).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = crate::protocol::tls::server_name(&target.host).ok_or(ErrorKind::Tls)?;
    let tcp = tokio::net::TcpStream::connect(target.addr)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
            _ => ErrorKind::Io,
        })?;
    let mut stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|_| ErrorKind::Tls)?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or(target.host.as_str(), |a| a.as_str());
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {}\r\nConnection: close\r\n\r\n",
        crate::protocol::USER_AGENT
    );
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|_| ErrorKind::Io)?;
    let mut buf = Vec::with_capacity(4096);
    loop {
        if let Some(port) = parse_head(&buf)? {
            return Ok(port);
        }
        if buf.len() >= crate::protocol::MAX_RESPONSE_HEAD {
            return Ok(None);
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.map_err(|_| ErrorKind::Io)?;
        if n == 0 {
            return Err(ErrorKind::ConnectionClosed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `Some(port or None)` once the head is complete, `None` while more bytes are needed.
fn parse_head(buf: &[u8]) -> Result<Option<Option<u16>>, ErrorKind> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    match crate::protocol::h1::parser().parse_response(&mut response, buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(_)) => {
            let mut headers = http::HeaderMap::new();
            for field in response.headers.iter() {
                if field.name.eq_ignore_ascii_case("alt-svc") {
                    let value = crate::protocol::h1::unfold(field.value);
                    if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                        headers.append(http::header::ALT_SVC, value);
                    }
                }
            }
            Ok(Some(alt_svc_h3(&headers)))
        }
        Err(_) => Err(ErrorKind::Protocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_alt_svc_from_a_complete_head_only() {
        let head = b"HTTP/1.1 200 OK\r\nAlt-Svc: h3=\":4433\"; ma=60\r\n\r\nbody";
        assert_eq!(parse_head(&head[..20]), Ok(None));
        assert_eq!(parse_head(head), Ok(Some(Some(4433))));
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_head(plain), Ok(Some(None)));
        assert_eq!(parse_head(b"garbage\r\n\r\n"), Err(ErrorKind::Protocol));
        // Folded over two lines (obs-fold), it is read unfolded (it was dropped).
        let folded = b"HTTP/1.1 200 OK\r\nAlt-Svc: h3=\":4433\";\r\n ma=60\r\n\r\n";
        assert_eq!(parse_head(folded), Ok(Some(Some(4433))));
    }
}
