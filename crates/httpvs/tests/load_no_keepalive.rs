//! `--no-keepalive -m N`: each of a connection slot's streams opens its own connection, and they
//! connect at the same time (up to `-c` x `-m` at once, as the README says). Their connects took
//! turns, so each request also waited for the others' handshakes, in no phase of the report (at
//! a 40 ms round trip, `-c 1 -m 3` ran at 22 req/s with p50 121 ms instead of 37 and 80 ms).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A proxy to `upstream` that holds new connections, bytes unforwarded, until `gather` of them
/// wait at once or the oldest has waited 1 s, then lets them all through. An h2c client's
/// connect waits for the server's SETTINGS, so the connects that overlapped arrive together.
/// Returns its address and the most connections it released at once.
fn gathering_proxy(upstream: SocketAddr, gather: usize) -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    listener.set_nonblocking(true).expect("nonblocking");
    let most = Arc::new(Mutex::new(0));
    let seen = most.clone();
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut held: Vec<TcpStream> = Vec::new();
        let mut oldest = Instant::now();
        // Bounded: the test's runs end well within this.
        while started.elapsed() < Duration::from_secs(30) {
            match listener.accept() {
                Ok((conn, _)) => {
                    if held.is_empty() {
                        oldest = Instant::now();
                    }
                    held.push(conn);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
            if !held.is_empty()
                && (held.len() >= gather || oldest.elapsed() >= Duration::from_secs(1))
            {
                let mut most = seen.lock().expect("lock");
                *most = (*most).max(held.len());
                for conn in held.drain(..) {
                    forward(conn, upstream);
                }
            }
        }
    });
    (addr, most)
}

/// Copies bytes both ways between `client` and a new connection to `upstream`.
fn forward(client: TcpStream, upstream: SocketAddr) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 << 10];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    };
    if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
        pipe(c, server);
        pipe(s, client);
    }
}

#[test]
fn a_slots_streams_connect_at_the_same_time() {
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    let (proxy, most) = gathering_proxy(server.http_addr().unwrap(), 3);
    let url = format!("http://{proxy}/");
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", &url, "-p", "h2c", "--no-keepalive"])
        .args(["-c", "1", "-m", "3", "-n", "3", "--json"])
        .output()
        .expect("httpvs runs");
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["requests"]["succeeded"], 3, "{report}");
    assert_eq!(report["connections"]["opened"], 3, "{report}");
    // The probe came alone; the three streams' connects came together.
    assert_eq!(*most.lock().expect("lock"), 3);
}
