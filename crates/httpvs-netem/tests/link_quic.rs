//! Async clients through the emulated link, as the load generator uses it: sockets made in the
//! client namespace, then driven by tokio from any thread (QUIC with quinn, TCP). Needs root.

use httpvs_netem::{Impairment, Link, LinkConfig};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn quic_echo_crosses_a_delayed_lossy_link() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let netem = Impairment::parse("delay 10ms loss 3%").unwrap();
    let mut config = LinkConfig::new(netem.clone(), netem);
    config.seed = 7;
    let link = Link::start(config).unwrap();
    let socket = link
        .run_in_client_ns(|| std::net::UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rtt = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), echo_over_quic(socket))
            .await
            .expect("QUIC echo finished in time")
    });
    let c = link.stop();
    assert!(
        rtt >= Duration::from_millis(20),
        "quinn's RTT {rtt:?} includes the link's 20 ms"
    );
    assert!(
        c.up.lost + c.down.lost > 0,
        "some packets were lost and recovered:\n{c}"
    );
}

/// Echoes 256 KB over one bidirectional stream; returns quinn's RTT estimate.
async fn echo_over_quic(client_socket: std::net::UdpSocket) -> Duration {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
    let server_config = quinn::ServerConfig::with_single_cert(vec![cert.clone()], key).unwrap();
    let server = quinn::Endpoint::server(server_config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let server_addr = server.local_addr().unwrap();
    let server_task = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = conn.accept_bi().await.unwrap();
        let data = recv.read_to_end(1 << 20).await.unwrap();
        send.write_all(&data).await.unwrap();
        send.finish().unwrap();
        conn.closed().await;
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();
    let runtime = quinn::default_runtime().unwrap();
    let mut endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        client_socket,
        runtime,
    )
    .unwrap();
    endpoint.set_default_client_config(client_config);
    let conn = endpoint
        .connect(server_addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let payload: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    send.write_all(&payload).await.unwrap();
    send.finish().unwrap();
    let echoed = recv.read_to_end(1 << 20).await.unwrap();
    assert_eq!(echoed, payload);
    let rtt = conn.rtt();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    server_task.abort();
    rtt
}

#[test]
fn tokio_tcp_socket_made_in_the_namespace_crosses_the_link() {
    if !httpvs_testkit::require_root() {
        return;
    }
    let netem = Impairment::parse("delay 20ms").unwrap();
    let link = Link::start(LinkConfig::new(netem.clone(), netem)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || listener.accept().map(|(_, peer)| peer));
    let socket = link
        .run_in_client_ns(tokio::net::TcpSocket::new_v4)
        .unwrap()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let took = runtime.block_on(async {
        let start = std::time::Instant::now();
        let stream = socket.connect(target).await.unwrap();
        drop(stream);
        start.elapsed()
    });
    let peer = server.join().unwrap().unwrap();
    assert_eq!(peer.ip(), link.addresses().client);
    assert!(
        took >= Duration::from_millis(40),
        "connect {took:?} crossed the 40 ms link"
    );
}
