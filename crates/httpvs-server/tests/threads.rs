//! Several worker threads share each port through SO_REUSEPORT; totals add up over workers.

mod support;

use httpvs_server::{Limits, ServeConfig};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn two_workers_serve_one_port_and_totals_add_up() {
    let server = httpvs_server::start(ServeConfig {
        threads: 2,
        cpus: Some(vec![0]),
        limits: Limits::default(),
        ..ServeConfig::loopback_ephemeral()
    })
    .unwrap();
    let addr = server.http_addr().unwrap();
    for _ in 0..20 {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut response = String::new();
        conn.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    let totals = server.shutdown(Duration::from_secs(1));
    assert_eq!((totals.connections.h1, totals.requests.h1), (20, 20));
}
