//! End to end through real TUN devices and namespaces: delay, loss, rate, corruption, bulk TCP
//! and QUIC between a client namespace and this host's loopback. Needs root.

use httpvs_netem::{Impairment, Layout, Link, LinkConfig};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One link at a time: the timing checks must not share two cores with a bulk transfer.
static SERIAL: Mutex<()> = Mutex::new(());

fn link(up: &str, down: &str, seed: u64) -> Link {
    let mut config = LinkConfig::new(
        Impairment::parse(up).unwrap(),
        Impairment::parse(down).unwrap(),
    );
    config.seed = seed;
    Link::start(config).expect("start link")
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// UDP across a link impaired `up`/`down`: `(link, receiver, sender, target)`. The receiver is
/// on this host's loopback at `target`, with a 500 ms read timeout (a reader ends once the
/// sender stops) and a buffer big enough that every missing datagram is the link's; the sender
/// is in the client namespace.
fn udp_path(up: &str, down: &str, seed: u64) -> (Link, UdpSocket, UdpSocket, SocketAddr) {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    set_receive_buffer(&receiver, 4 << 20);
    let target = receiver.local_addr().unwrap();
    let link = link(up, down, seed);
    let sender = link
        .run_in_client_ns(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    (link, receiver, sender, target)
}

#[test]
fn delay_50ms_each_way_reads_as_100ms_of_tcp_connect() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let acceptor = std::thread::spawn(move || {
        for _ in 0..5 {
            let _ = listener.accept();
        }
    });
    let link = link("delay 50ms", "delay 50ms", 1);
    let times: Vec<Duration> = link
        .run_in_client_ns(|| {
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    let stream =
                        TcpStream::connect_timeout(&target, Duration::from_secs(5)).unwrap();
                    let took = start.elapsed();
                    drop(stream);
                    took
                })
                .collect()
        })
        .unwrap();
    acceptor.join().unwrap();
    // The median: one connect may lose the CPU to a neighbour on a busy 2-core machine.
    let mut sorted = times.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    // Never under the delay; over it by at most the relay's wake-ups on a loaded machine (a
    // quiet one reads 100.3 ms; with a parallel build beside it, 104-151 ms were seen). A delay
    // applied twice, or per packet of the handshake, still reads 150 ms or more.
    assert!(
        median >= Duration::from_millis(100) && median < Duration::from_millis(125),
        "median connect {median:?}, want 100 ms (+ under 25 ms) (all: {times:?})"
    );
    let c = link.stop();
    assert!(c.up.packets_in >= 5 && c.down.packets_in >= 5, "{c}");
}

#[test]
fn udp_loss_of_10_percent_measures_10_percent() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let (link, receiver, sender, target) = udp_path("loss 10%", "", 2);
    let counter = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut got = 0u32;
        while receiver.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    for i in 0..10_000u32 {
        sender.send_to(&i.to_be_bytes().repeat(16), target).unwrap();
        // Paced so no kernel queue overflows: every missing datagram is netem's.
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let got = counter.join().unwrap();
    let lost = 1.0 - got as f64 / 10_000.0;
    let c = link.stop();
    assert!(
        (lost - 0.10).abs() <= 0.01,
        "lost {lost:.4}, counters:\n{c}"
    );
    assert_eq!(c.up.lost, 10_000 - got as u64, "{c}");
}

#[test]
fn tcp_20mb_at_5_percent_loss_arrives_intact() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    const SIZE: usize = 20 * 1024 * 1024;
    let data: Vec<u8> = (0..SIZE).map(|i| (i * 7 + i / 4099) as u8).collect();
    let want = Sha256::digest(&data);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&data).unwrap();
    });
    let link = link("delay 1ms loss 5%", "delay 1ms loss 5%", 3);
    let stream = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&target, Duration::from_secs(5)))
        .unwrap()
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut received = Vec::with_capacity(SIZE);
    (&stream).read_to_end(&mut received).unwrap();
    server.join().unwrap();
    let c = link.stop();
    assert_eq!(received.len(), SIZE);
    assert_eq!(Sha256::digest(&received), want, "checksum");
    assert!(c.down.lost > 500, "loss happened: {c}");
}

#[test]
fn rate_10mbit_is_within_5_percent() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let (link, receiver, sender, target) = udp_path("rate 10mbit", "", 4);
    let timer = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (mut first, mut last, mut bytes, mut count) = (None, Instant::now(), 0usize, 0usize);
        while let Ok(n) = receiver.recv(&mut buf) {
            let now = Instant::now();
            if first.is_none() {
                first = Some(now);
            } else {
                bytes += n + 28; // IP and UDP headers cross the link too
            }
            last = now;
            count += 1;
        }
        (first.map(|f| last - f), bytes, count)
    });
    // 800 datagrams of 1228 IP bytes: 0.79 s at 10 Mbit/s, held by netem's queue (limit 1000).
    for i in 0..800u32 {
        sender.send_to(&[i as u8; 1200], target).unwrap();
    }
    let (span, bytes, count) = timer.join().unwrap();
    let span = span.expect("something arrived");
    let c = link.stop();
    let mbit = bytes as f64 * 8.0 / span.as_secs_f64() / 1e6;
    assert_eq!(count, 800, "{c}");
    assert!(
        (mbit - 10.0).abs() <= 0.5,
        "measured {mbit:.3} Mbit/s over {span:?}"
    );
}

#[test]
fn corruption_is_dropped_by_receiver_checksums() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let (link, receiver, sender, target) = udp_path("corrupt 10%", "", 5);
    let payload =
        |i: u32| -> [u8; 1000] { std::array::from_fn(|j| (i.wrapping_mul(31) ^ j as u32) as u8) };
    let checker = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (mut good, mut bad) = (0u32, 0u32);
        while let Ok(n) = receiver.recv(&mut buf) {
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            if n == 1004 && buf[4..n] == payload(i)[..] {
                good += 1;
            } else {
                bad += 1;
            }
        }
        (good, bad)
    });
    for i in 0..3000u32 {
        let mut datagram = i.to_be_bytes().to_vec();
        datagram.extend(payload(i));
        sender.send_to(&datagram, target).unwrap();
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let (good, bad) = checker.join().unwrap();
    let c = link.stop();
    assert_eq!(bad, 0, "a corrupted datagram got through: {c}");
    assert!(c.up.corrupted > 200, "{c}");
    assert_eq!(
        good as u64,
        3000 - c.up.corrupted,
        "every corrupted one dropped: {c}"
    );
}

#[test]
fn namespaces_layout_connects_client_to_server_namespace() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let mut config = LinkConfig::new(
        Impairment::parse("delay 5ms").unwrap(),
        Impairment::default(),
    );
    config.layout = Layout::Namespaces;
    let link = Link::start(config).unwrap();
    let listener = link
        .run_in_server_ns(|| TcpListener::bind("127.0.0.1:0"))
        .unwrap()
        .unwrap();
    let target = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(b"hello from the server namespace").unwrap();
        peer
    });
    let mut stream = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&target, Duration::from_secs(5)))
        .unwrap()
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert_eq!(text, "hello from the server namespace");
    let peer: SocketAddr = server.join().unwrap();
    assert_eq!(peer.ip(), link.addresses().client);
    // The host's loopback is not reachable from the client of a self-contained link.
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_addr = host.local_addr().unwrap();
    let reach = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&host_addr, Duration::from_millis(300)))
        .unwrap();
    assert!(reach.is_err());
}

#[test]
fn client_reaches_nothing_beyond_the_link() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let link = link("", "", 6);
    let outside: SocketAddr = "192.0.2.1:80".parse().unwrap();
    let err = link
        .run_in_client_ns(|| TcpStream::connect_timeout(&outside, Duration::from_millis(300)))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENETUNREACH), "{err}");
    let device = link.host_device().unwrap().to_string();
    assert!(std::path::Path::new(&format!("/sys/class/net/{device}")).exists());
    drop(link);
    assert!(
        !std::path::Path::new(&format!("/sys/class/net/{device}")).exists(),
        "device removed"
    );
}

/// A receive buffer big enough that no datagram is dropped by the receiver itself.
fn set_receive_buffer(socket: &UdpSocket, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a pointer to a live i32 and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            4,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE");
}

#[test]
fn start_sweeps_devices_left_by_dead_processes() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    // A pid that surely ended: a child we already reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("hv-{dead}-0");
    let made = std::process::Command::new("ip")
        .args(["tuntap", "add", "dev", &stale, "mode", "tun"])
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: `ip tuntap` could not make a persistent device");
        return;
    }
    assert!(std::path::Path::new(&format!("/sys/class/net/{stale}")).exists());
    let link = link("", "", 8);
    assert!(
        !std::path::Path::new(&format!("/sys/class/net/{stale}")).exists(),
        "the stale device of pid {dead} was swept"
    );
    drop(link);
}

#[test]
fn a_packet_the_kernel_refuses_is_a_drop_not_a_crash() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let _serial = serial();
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = receiver.local_addr().unwrap();
    // Every packet gets one flipped bit; in small packets some land in the IP version nibble,
    // which makes the TUN write fail with EINVAL.
    let link = link("corrupt 100%", "", 9);
    let sender = link
        .run_in_client_ns(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    for i in 0..3000u32 {
        sender.send_to(&[], target).unwrap();
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while link.counters().up.packets_out < 3000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let c = link.stop();
    assert_eq!(
        c.up.packets_out, 3000,
        "the relay went on after refusals: {c}"
    );
    assert!(c.up.rejected > 0, "some writes were refused: {c}");
}
