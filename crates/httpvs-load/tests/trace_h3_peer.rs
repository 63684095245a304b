//! `httpvs trace -p h3` against a scripted QUIC peer (quinn, in-process, 127.0.0.1:0) that
//! reports what it saw: the trace's CONNECTION_CLOSE (H3_NO_ERROR, not an idle timeout), no
//! request stream opened past a GOAWAY, the request body (`-d`) on the wire and shown with
//! `--body`, and the peer's close reason in a failed request's one line.

mod protocol_support;

use bytes::Bytes;
use httpvs_load::protocol::{ProtocolKind, RequestSpec};
use httpvs_load::trace::event::EventKind;
use httpvs_load::trace::{self, Trace, TraceConfig};
use httpvs_load::{ProtocolChoice, TlsOptions};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How long the test waits for the peer to report; the peer idles out after twice this.
const REPORT_WITHIN: Duration = Duration::from_secs(3);

/// What the peer does with each request stream.
#[derive(Clone, Copy)]
enum Script {
    /// Answers 200 "ok".
    Answer,
    /// Sends GOAWAY(4) on its control stream first, then (50 ms later) answers.
    GoawayFirst,
    /// Closes the connection with H3_INTERNAL_ERROR and the reason "boom".
    CloseWithError,
}

/// What the peer saw.
#[derive(Debug)]
enum Seen {
    /// A request stream was accepted, with the bytes the client sent on it.
    Stream(u64, Vec<u8>),
    /// The connection ended, as quinn told the peer.
    Closed(quinn::ConnectionError),
}

/// `:status 200` (static index 25) and `content-length: 2` (name ref 4), then DATA "ok".
fn ok_response() -> Vec<u8> {
    let mut out = vec![0x01, 0x06, 0, 0, 0xc0 | 25, 0x54, 0x01, b'2'];
    out.extend_from_slice(&[0x00, 0x02, b'o', b'k']);
    out
}

/// Starts the peer on its own thread; it serves one connection.
fn peer(script: Script, max_streams: u32) -> (SocketAddr, mpsc::Receiver<Seen>) {
    let (tls, _) = protocol_support::h3_server_tls();
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(max_streams.into());
    let idle = quinn::IdleTimeout::try_from(REPORT_WITHIN * 2).expect("idle");
    transport.max_idle_timeout(Some(idle));
    config.transport_config(Arc::new(transport));
    let (addr_tx, addr_rx) = mpsc::channel();
    let (seen_tx, seen_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().expect("addr"))
                .expect("bind");
            addr_tx
                .send(endpoint.local_addr().expect("addr"))
                .expect("addr");
            let Some(incoming) = endpoint.accept().await else {
                return;
            };
            let Ok(conn) = incoming.await else { return };
            let mut control = conn.open_uni().await.expect("control stream");
            // Control stream type, empty SETTINGS.
            control
                .write_all(&[0x00, 0x04, 0x00])
                .await
                .expect("SETTINGS");
            let serving = async {
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    let request = recv.read_to_end(1 << 16).await.unwrap_or_default();
                    let _ = seen_tx.send(Seen::Stream(recv.id().index() * 4, request));
                    match script {
                        Script::Answer => {}
                        Script::GoawayFirst => {
                            // GOAWAY(4): stream 0 is the last the peer processes.
                            control
                                .write_all(&[0x07, 0x01, 0x04])
                                .await
                                .expect("GOAWAY");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Script::CloseWithError => {
                            conn.close(0x102u32.into(), b"boom");
                            break;
                        }
                    }
                    let _ = send.write_all(&ok_response()).await;
                    let _ = send.finish();
                }
            };
            let (_, reason) = tokio::join!(serving, conn.closed());
            let _ = seen_tx.send(Seen::Closed(reason));
            // Keep the control stream open until the end: closing it is a connection error.
            drop(control);
            // Our own close (CloseWithError) must leave before this runtime goes away.
            let _ = tokio::time::timeout(REPORT_WITHIN, endpoint.wait_idle()).await;
        });
    });
    let addr = addr_rx.recv_timeout(REPORT_WITHIN).expect("peer address");
    (addr, seen_rx)
}

fn config(addr: SocketAddr, requests: u32, body: &'static str) -> TraceConfig {
    let url: http::Uri = format!("https://localhost:{}/", addr.port())
        .parse()
        .expect("url");
    TraceConfig {
        url: url.clone(),
        protocol: ProtocolChoice::Fixed(ProtocolKind::H3),
        requests,
        request: RequestSpec {
            method: if body.is_empty() {
                http::Method::GET
            } else {
                http::Method::POST
            },
            uri: url,
            headers: Vec::new(),
            body: Bytes::from_static(body.as_bytes()),
        },
        tls: TlsOptions {
            insecure: true,
            cacert: None,
            client_identity: None,
        },
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
        show_body: true,
        windows: Default::default(),
        linger: Duration::ZERO,
        stop: Default::default(),
        connect_to: None,
    }
}

/// Everything the peer reported until it saw the connection end (bounded).
fn seen_until_closed(seen: &mpsc::Receiver<Seen>) -> (Vec<(u64, Vec<u8>)>, quinn::ConnectionError) {
    let mut streams = Vec::new();
    loop {
        match seen.recv_timeout(REPORT_WITHIN) {
            Ok(Seen::Stream(id, bytes)) => streams.push((id, bytes)),
            Ok(Seen::Closed(reason)) => return (streams, reason),
            Err(e) => panic!("the peer saw no close within {REPORT_WITHIN:?}: {e}"),
        }
    }
}

fn failures(trace: &Trace) -> Vec<&str> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RequestFailed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_trace_closes_with_h3_no_error_before_it_exits() {
    let (addr, seen) = peer(Script::Answer, 100);
    let trace = trace::run(&config(addr, 1, "")).expect("trace runs");
    assert!(trace.failure.is_none(), "{:?}", trace.failure);
    let (_, reason) = seen_until_closed(&seen);
    match reason {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 0x100, "{close:?}")
        }
        other => panic!("the peer saw {other:?}, not our H3_NO_ERROR close"),
    }
}

#[test]
fn no_request_stream_opens_past_the_goaway() {
    // One stream at a time: requests 2 and 3 wait for stream credit, which comes only after
    // the GOAWAY(4) has arrived.
    let (addr, seen) = peer(Script::GoawayFirst, 1);
    let trace = trace::run(&config(addr, 3, "")).expect("trace runs");
    let (streams, _) = seen_until_closed(&seen);
    let ids: Vec<u64> = streams.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [0], "streams the peer accepted");
    let opened = trace
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::H3StreamOpened { .. }))
        .count();
    assert_eq!(opened, 1);
    let failed = failures(&trace);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed.iter().all(|f| f.starts_with("not sent")),
        "{failed:?}"
    );
    let s = &trace.summary;
    assert_eq!((s.succeeded, s.failed, s.not_sent), (1, 0, 2));
    assert_eq!(s.statuses.get(&200), Some(&1));
    let failure = trace.failure.as_deref().unwrap_or_default();
    assert!(failure.starts_with("2 of 3 requests not sent"), "{failure}");
}

#[test]
fn the_request_body_goes_out_and_is_shown_with_body() {
    let (addr, seen) = peer(Script::Answer, 100);
    let trace = trace::run(&config(addr, 1, "hello")).expect("trace runs");
    assert!(trace.failure.is_none(), "{:?}", trace.failure);
    let (streams, _) = seen_until_closed(&seen);
    let [(_, request)] = &streams[..] else {
        panic!("one request stream expected: {streams:?}");
    };
    // DATA frame: type 0, length 5, "hello".
    assert!(
        request.windows(7).any(|w| w == b"\x00\x05hello"),
        "{request:?}"
    );
    let shown = trace.events.iter().any(|e| {
        matches!(&e.kind, EventKind::H3Frame { frame_type: 0, text: Some(t), .. } if t == "hello")
    });
    assert!(shown, "{:#?}", trace.events);
}

#[test]
fn a_failed_request_names_the_peers_close_reason() {
    let (addr, seen) = peer(Script::CloseWithError, 100);
    let trace = trace::run(&config(addr, 1, "")).expect("trace runs");
    let _ = seen_until_closed(&seen);
    let failed = failures(&trace);
    assert_eq!(failed.len(), 1, "{:#?}", trace.events);
    assert!(failed[0].contains("H3_INTERNAL_ERROR"), "{}", failed[0]);
    assert!(failed[0].contains("boom"), "{}", failed[0]);
    assert!(!failed[0].contains('\n'));
    assert_eq!((trace.summary.failed, trace.summary.not_sent), (1, 0));
}
