//! Speed of the relay with no impairment: TCP throughput from the client namespace to this
//! host's loopback, and the round-trip time it adds to a UDP ping-pong. Run by `bench/netem`.

use httpvs_netem::{Impairment, Link, LinkConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mtu: u32 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let mut config = LinkConfig::new(Impairment::default(), Impairment::default());
    config.mtu = mtu;
    let link = match Link::start(config) {
        Ok(link) => link,
        Err(e) => {
            eprintln!("netem bench: {e}");
            std::process::exit(1);
        }
    };
    let gbit = throughput(&link, Duration::from_secs(seconds));
    println!(
        "throughput  client ns -> host, TCP, MTU {mtu}, {seconds} s: {gbit:.2} Gbit/s (goal >= 1)"
    );
    let direct = udp_rtt(None, 5000);
    let relayed = udp_rtt(Some(&link), 5000);
    println!(
        "udp rtt     direct loopback: median {:.1} us, p99 {:.1} us",
        direct.0, direct.1
    );
    println!(
        "udp rtt     through relay:   median {:.1} us, p99 {:.1} us",
        relayed.0, relayed.1
    );
    println!(
        "added latency (median rtt through relay - direct): {:.1} us (goal <= 50)",
        relayed.0 - direct.0
    );
    let c = link.stop();
    print!("{c}");
}

/// Gbit/s of one TCP stream from the client namespace to a sink on 127.0.0.1.
fn throughput(link: &Link, run_for: Duration) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("addr");
    let sink = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        let start = Instant::now();
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        (total, start.elapsed())
    });
    let mut stream = link
        .run_in_client_ns(|| TcpStream::connect(target))
        .expect("namespace")
        .expect("connect");
    let chunk = vec![0x42u8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < run_for {
        stream.write_all(&chunk).expect("write");
    }
    drop(stream);
    let (bytes, took) = sink.join().expect("sink");
    bytes as f64 * 8.0 / took.as_secs_f64() / 1e9
}

/// Median and p99 round trip in microseconds of 1-byte UDP ping-pongs to an echo on 127.0.0.1.
fn udp_rtt(link: Option<&Link>, rounds: usize) -> (f64, f64) {
    let echo = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let target: SocketAddr = echo.local_addr().expect("addr");
    echo.set_read_timeout(Some(Duration::from_secs(1))).ok();
    let echoer = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = echo.recv_from(&mut buf) {
            if buf[..n] == [0xff] {
                break;
            }
            let _ = echo.send_to(&buf[..n], from);
        }
    });
    let bind = || UdpSocket::bind("0.0.0.0:0");
    let socket = match link {
        Some(link) => link.run_in_client_ns(bind).expect("namespace"),
        None => bind(),
    }
    .expect("bind client");
    socket.set_read_timeout(Some(Duration::from_secs(1))).ok();
    let mut samples = Vec::with_capacity(rounds);
    let mut buf = [0u8; 64];
    for i in 0..rounds + 100 {
        let start = Instant::now();
        socket.send_to(&[1], target).expect("send");
        if socket.recv(&mut buf).is_ok() && i >= 100 {
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let _ = socket.send_to(&[0xff], target);
    let _ = echoer.join();
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}
