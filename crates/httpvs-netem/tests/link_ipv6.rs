//! `[::1]` through a link to this host's loopback: TCP and UDP reach servers bound to `[::1]`,
//! the client sees answers from `[::1]`, and the delay applies. Needs root and nft.

use httpvs_netem::{Impairment, Layout, Link, LinkConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn link(layout: Layout) -> Option<Link> {
    if !httpvs_testkit::require_root() || httpvs_testkit::require_peer("nft").is_none() {
        return None;
    }
    let delay = Impairment::parse("delay 20ms").unwrap();
    let config = LinkConfig::new(delay.clone(), delay).with_layout(layout);
    Some(Link::start(config).expect("start link"))
}

#[test]
fn tcp_to_ipv6_loopback_crosses_the_link() {
    let Some(link) = link(Layout::HostLoopback) else {
        return;
    };
    assert_eq!(link.ipv6_unavailable(), None);
    let listener = TcpListener::bind("[::1]:0").unwrap();
    let target = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    let started = Instant::now();
    let mut client = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&target, Duration::from_secs(5)))
        .unwrap()
        .expect("connect to [::1] through the link");
    let connect = started.elapsed();
    assert_eq!(client.peer_addr().unwrap(), target, "the client sees [::1]");
    client.write_all(b"hello").unwrap();
    let mut echo = [0u8; 5];
    client.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"hello");
    server.join().unwrap();
    // A lower bound only: the SYN and its answer each cross a 20 ms direction.
    assert!(
        connect >= Duration::from_millis(39),
        "connect took {connect:?}"
    );
    let c = link.stop();
    assert!(c.up.packets_out >= 3 && c.down.packets_out >= 3, "{c}");
}

#[test]
fn udp_to_ipv6_loopback_crosses_the_link_and_answers_come_from_it() {
    let Some(link) = link(Layout::HostLoopback) else {
        return;
    };
    let echo = UdpSocket::bind("[::1]:0").unwrap();
    echo.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let target = echo.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..4 {
            let (n, from) = echo.recv_from(&mut buf).unwrap();
            echo.send_to(&buf[..n], from).unwrap();
        }
    });
    let client = link
        .run_in_client_ns(|| UdpSocket::bind("[::]:0"))
        .unwrap()
        .unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    for i in 0..3u8 {
        client.send_to(&[i; 10], target).unwrap();
        let mut buf = [0u8; 64];
        let (n, from): (usize, SocketAddr) = client.recv_from(&mut buf).unwrap();
        assert_eq!((n, buf[0], from), (10, i, target));
    }
    // An empty datagram is one too, both ways (it went missing in the forwarder).
    client.send_to(&[], target).unwrap();
    let mut buf = [0u8; 64];
    let (n, from): (usize, SocketAddr) = client.recv_from(&mut buf).unwrap();
    assert_eq!((n, from), (0, target));
    server.join().unwrap();
}

/// A server that stops after the forwarder carried its port is refused from then on, as
/// without emulation: the forwarder kept the port bound for good, so TCP connects were
/// accepted and reset, and datagrams (h3's probes too) vanished.
#[test]
fn a_port_whose_server_stopped_is_refused_after_it() {
    let Some(link) = link(Layout::HostLoopback) else {
        return;
    };
    let listener = TcpListener::bind("[::1]:0").unwrap();
    let tcp = listener.local_addr().unwrap();
    let echo = UdpSocket::bind("[::1]:0").unwrap();
    let udp = echo.local_addr().unwrap();
    let connect = || {
        link.run_in_client_ns(|| TcpStream::connect_timeout(&tcp, Duration::from_secs(5)))
            .unwrap()
    };
    drop(connect().expect("the server is there"));
    drop(listener);
    // The first connect after the stop was accepted before the host refused: reset, or
    // refused already; by the third the port is closed.
    let mut last = None;
    for _ in 0..3 {
        if let Err(e) = connect().and_then(|mut s| s.read(&mut [0u8; 1])) {
            last = Some(e.kind());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(last, Some(std::io::ErrorKind::ConnectionRefused));

    let client = link
        .run_in_client_ns(|| UdpSocket::bind("[::]:0"))
        .unwrap()
        .unwrap();
    client.connect(udp).unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    client.send(b"hello").unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = echo.recv_from(&mut buf).unwrap();
    echo.send_to(&buf[..n], from).unwrap();
    assert_eq!(client.recv(&mut buf).unwrap(), 5);
    drop(echo);
    let mut refused = false;
    for _ in 0..4 {
        let _ = client.send(b"again");
        match client.recv(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                refused = true;
                break;
            }
            _ => {}
        }
    }
    assert!(refused, "datagrams to a stopped server are refused");
}

#[test]
fn a_closed_ipv6_loopback_port_is_refused_not_accepted_and_reset() {
    let Some(link) = link(Layout::HostLoopback) else {
        return;
    };
    let closed = TcpListener::bind("[::1]:0").unwrap().local_addr().unwrap();
    let attempt = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&closed, Duration::from_secs(5)))
        .unwrap();
    let err = attempt.expect_err("nothing listens there");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
}

#[test]
fn a_namespaces_link_says_ipv6_loopback_is_not_carried() {
    let Some(link) = link(Layout::Namespaces) else {
        return;
    };
    let why = link.ipv6_unavailable().expect("not carried");
    assert!(why.contains("this host's loopback"), "{why}");
}
