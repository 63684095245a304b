//! `httpvs_load::run` against broken peers (raw servers on 127.0.0.1, port 0): what the client
//! finds wrong is its own error, not the server closing, and it does not retry into a storm.

use httpvs_load::protocol::ProtocolKind;
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// An h2c server that answers the preface with SETTINGS, then, once a request's HEADERS came,
/// sends a frame header announcing 16 MiB (over the 16 KiB we allow): a FRAME_SIZE_ERROR.
/// Probe connections (no HEADERS) see a well-behaved peer. Serves until the test process ends.
fn oversize_frame_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            std::thread::spawn(move || serve_oversize(tcp));
        }
    });
    addr
}

fn serve_oversize(mut tcp: TcpStream) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let settings = [0u8, 0, 0, 4, 0, 0, 0, 0, 0];
    if tcp.write_all(&settings).is_err() {
        return;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if saw_headers(&got) {
            break;
        }
    }
    // DATA on stream 1, length 0xFFFFFF.
    let _ = tcp.write_all(&[0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1]);
    // Hold the connection until the client closes it.
    while matches!(tcp.read(&mut buf), Ok(n) if n > 0) {}
}

/// Whether the client's bytes (preface, then frames) hold a HEADERS frame.
fn saw_headers(bytes: &[u8]) -> bool {
    let mut pos = 24;
    while bytes.len() >= pos + 9 {
        let len = usize::from(bytes[pos]) << 16
            | usize::from(bytes[pos + 1]) << 8
            | usize::from(bytes[pos + 2]);
        if bytes[pos + 3] == 1 {
            return true;
        }
        pos += 9 + len;
    }
    false
}

#[test]
fn an_h2_protocol_error_fails_its_requests_without_retries() {
    let addr = oversize_frame_server();
    let config = LoadConfig::new(&format!("http://{addr}/"))
        .unwrap()
        .protocol(ProtocolChoice::Fixed(ProtocolKind::H2c))
        .shape(1, 1)
        .threads(1)
        .requests(5);
    let r = httpvs_load::run(&config, &mut Quiet).expect("run starts");
    assert!(r.requests.identity_holds, "{:?}", r.requests);
    assert_eq!(r.requests.failed, 5, "{:?}", r.requests);
    assert_eq!(r.requests.retried.total, 0, "{:?}", r.requests.retried);
    assert!(
        r.errors
            .iter()
            .any(|e| e.kind == "protocol" && e.count == 5),
        "{:?}",
        r.errors
    );
    // One connection per request, each closed by us after the server's error.
    assert_eq!(r.connections.opened, 5, "{:?}", r.connections);
    assert_eq!(
        r.connections.closed_by_server.total, 0,
        "{:?}",
        r.connections
    );
    assert_eq!(r.connections.closed_locally, 5, "{:?}", r.connections);
}
