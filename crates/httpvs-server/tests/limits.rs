//! Connection limits: idle and stalled connections are closed after the idle timeout, connections
//! over `max_connections` are refused, and shutdown lets in-flight requests finish.

mod support;

use httpvs_server::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads until EOF; true if the server closed the connection within `limit`.
fn closed_by_server(conn: &mut TcpStream, limit: Duration) -> bool {
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn idle_and_stalled_connections_are_closed_after_the_timeout() {
    let server = support::server(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let addr = server.http_addr().unwrap();
    // Silent after connecting.
    let mut silent = TcpStream::connect(addr).unwrap();
    // Half a request head, then nothing (slowloris).
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    // A served keep-alive connection that then idles.
    let mut kept = TcpStream::connect(addr).unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Half an h2c preface.
    let mut half_h2 = TcpStream::connect(addr).unwrap();
    half_h2.write_all(b"PRI * HTTP/2.0\r\n").unwrap();
    for (name, conn) in [
        ("silent", &mut silent),
        ("stalled", &mut stalled),
        ("kept", &mut kept),
        ("half h2c preface", &mut half_h2),
    ] {
        assert!(closed_by_server(conn, Duration::from_secs(10)), "{name}");
    }
    // Closed sockets still linger (waiting for our FIN to be answered) for at most 2 s.
    drop((silent, stalled, kept, half_h2));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.open_connections() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.open_connections(), 0);
    // Whoever closed them (the idle watch, hyper's header read timeout, the opening probe's).
    assert_eq!(server.totals().rejected.idle_closed, 4);
}

#[test]
fn a_pending_delay_is_not_idleness() {
    let server = support::server(Limits {
        idle_timeout: Duration::from_millis(200),
        ..Limits::default()
    });
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    conn.write_all(b"GET /?delay=600ms HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
}

#[test]
fn connections_over_the_limit_are_refused() {
    let server = support::server(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let addr = server.http_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut buf = [0u8; 16];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.read_exact(&mut buf).unwrap();
        held.push(c);
    }
    let mut third = TcpStream::connect(addr).unwrap();
    assert!(closed_by_server(&mut third, Duration::from_secs(5)));
    assert_eq!(server.totals().rejected.over_max_connections, 1);
    drop(held);
}

/// An HTTP/1.1 client that resets its connection while its request waits out a `?delay`: the
/// connection, and its place under `max_connections`, is freed then, not at the delay's end
/// (hyper reads nothing while it answers; two such clients locked everyone out for 60 s).
/// One that only shuts its writing side still gets its answer (the README's half-close).
#[test]
fn a_delayed_request_whose_client_resets_frees_its_place() {
    let server = support::server(Limits {
        max_connections: 2,
        ..Limits::default()
    });
    let addr = server.http_addr().unwrap();
    for _ in 0..2 {
        let c = TcpStream::connect(addr).unwrap();
        (&c).write_all(b"GET /?delay=60s HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        socket2::SockRef::from(&c)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(c);
    }
    // Let both requests reach the server and both resets land, then ask: a place is free again
    // (within 10 s; each try the server refuses closes at once).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let answered = loop {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut buf = [0u8; 12];
        if c.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.1 200") {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(answered, "the reset clients still hold their places");
    // Half-closed after its request: still answered.
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /?delay=200ms HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut response = String::new();
    let _ = c.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response:?}");
}

#[test]
fn shutdown_lets_in_flight_requests_finish() {
    let server = support::server(Limits::default());
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    conn.write_all(b"GET /?delay=300ms HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Let the request reach the server before it stops accepting.
    while server.totals().requests.h1 == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let reader = std::thread::spawn(move || {
        let mut response = String::new();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = conn.read_to_string(&mut response);
        response
    });
    let totals = server.shutdown(Duration::from_secs(5));
    let response = reader.join().unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(totals.requests.h1, 1);
}

#[test]
fn h1_closes_after_n_requests_with_connection_close() {
    let server = support::server(Limits {
        max_requests_per_conn: Some(3),
        ..Limits::default()
    });
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    // Five pipelined requests: three are answered, the third with `Connection: close`.
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.write_all(&request.repeat(5)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut responses = String::new();
    let _ = conn.read_to_string(&mut responses);
    assert_eq!(responses.matches("HTTP/1.1 200").count(), 3, "{responses}");
    let last = responses.rsplit("HTTP/1.1 200").next().unwrap();
    assert!(
        last.to_ascii_lowercase().contains("connection: close"),
        "{last}"
    );
}

#[test]
fn close_1_inside_a_pipeline_keeps_the_answers_before_it() {
    let server = support::server(Limits::default());
    let mut conn = TcpStream::connect(server.http_addr().unwrap()).unwrap();
    let plain = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    let closing = b"GET /?close=1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    conn.write_all(&[plain.clone(), plain.clone(), closing, plain].concat())
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut responses = String::new();
    let _ = conn.read_to_string(&mut responses);
    assert_eq!(responses.matches("HTTP/1.1 200").count(), 3, "{responses}");
}

/// Connections that sent nothing yet (a browser's or a port check's pre-connect), on the
/// cleartext and the TLS port, close when the server stops: they used to hold the stop for the
/// whole grace period, as if a request were in flight.
#[test]
fn connections_that_never_opened_do_not_hold_the_stop() {
    let server = support::server(Limits::default());
    let mut silent = [
        TcpStream::connect(server.http_addr().unwrap()).unwrap(),
        TcpStream::connect(server.https_addr().unwrap()).unwrap(),
    ];
    std::thread::sleep(Duration::from_millis(100));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let totals = server.shutdown(Duration::from_secs(60));
        let _ = done_tx.send(totals);
    });
    // Bounded far below the 60 s grace: a stop that waited for them would fail here.
    let totals = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the stop did not wait for connections that never sent a byte");
    assert_eq!(totals.failed.cut_off_at_stop, 0, "{totals:?}");
    for conn in &mut silent {
        assert!(closed_by_server(conn, Duration::from_secs(5)));
    }
}
