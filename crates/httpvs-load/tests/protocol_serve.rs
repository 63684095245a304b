//! The TCP protocols against `httpvs serve` in-process on port 0: sized bodies, pipelining,
//! `close=` (h1 Connection: close, h2 GOAWAY), requests-per-connection limits as retries,
//! status codes, and h2 over TLS trusting the server's own certificate.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h1::Http1;
use httpvs_load::protocol::h2::Http2;
use httpvs_load::protocol::{
    CloseCause, Connection, Protocol, RequestSpec, RetryReason, SendError, Target,
};
use httpvs_server::{start, RunningServer, ServeConfig};
use protocol_support::{get, options, target};

fn serve(max_requests_per_conn: Option<u64>) -> RunningServer {
    let mut config = ServeConfig::loopback_ephemeral();
    config.h3 = None;
    config.limits.max_requests_per_conn = max_requests_per_conn;
    start(config).expect("httpvs serve starts")
}

/// Sends `total` requests `depth` at a time, reconnecting whenever a connection stops
/// accepting; returns (succeeded, retried, connections). Any failure panics.
async fn run_to_completion<P: Protocol>(
    protocol: &P,
    target: &Target,
    req: &RequestSpec,
    total: usize,
    depth: u32,
) -> (usize, usize, usize) {
    let opts = options(depth, None);
    let (mut done, mut retried, mut connections) = (0, 0, 0);
    while done < total {
        let (conn, _) = protocol.connect(target, &opts).await.expect("connects");
        connections += 1;
        while conn.accepts_requests() && done < total {
            for result in
                join_all((0..depth).map(|_| conn.send(req, std::time::Instant::now()))).await
            {
                match result {
                    Ok(resp) => {
                        assert_eq!(resp.status, 200);
                        done += 1;
                    }
                    Err(SendError::Retry(_)) => retried += 1,
                    Err(e) => panic!("request failed: {e:?}"),
                }
            }
        }
    }
    (done, retried, connections)
}

#[tokio::test(flavor = "current_thread")]
async fn h1_pipelines_sized_bodies() {
    let server = serve(None);
    let target = target("http", server.http_addr().unwrap());
    let (conn, _) = Http1::default()
        .connect(&target, &options(8, None))
        .await
        .unwrap();
    let req = get(&target, "/?size=3000");
    for result in join_all((0..8).map(|_| conn.send(&req, std::time::Instant::now()))).await {
        assert_eq!(result.unwrap().body_bytes, 3000);
    }
    let resp = conn
        .send(&get(&target, "/?status=503"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.status, 503);
    assert!(conn.accepts_requests());
}

#[tokio::test(flavor = "current_thread")]
async fn h1_close_query_closes_and_the_next_request_retries() {
    let server = serve(None);
    let target = target("http", server.http_addr().unwrap());
    let (conn, _) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    // Not pipelined: httpvs serve drops a request pipelined behind `close=1` unanswered
    // (nginx answers it; see protocol_h1's pipeline test).
    let resp = conn
        .send(&get(&target, "/?close=1"), std::time::Instant::now())
        .await
        .unwrap();
    assert!(resp.close_requested);
    assert_eq!(conn.close_cause(), CloseCause::ConnectionClose);
    assert!(!conn.accepts_requests());
    let next = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await;
    assert_eq!(
        next.err(),
        Some(SendError::Retry(RetryReason::ConnectionClosed))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn h1_requests_per_connection_limit_is_all_retries() {
    let server = serve(Some(5));
    let target = target("http", server.http_addr().unwrap());
    let req = get(&target, "/");
    let (done, retried, connections) =
        run_to_completion(&Http1::default(), &target, &req, 40, 3).await;
    assert!(done >= 40, "{done}");
    assert!(
        connections >= 8,
        "{connections} connections for 40 requests at 5 each"
    );
    assert!(retried > 0);
}

#[tokio::test(flavor = "current_thread")]
async fn h2c_goaway_after_n_is_all_retries() {
    let server = serve(Some(5));
    let target = target("http", server.http_addr().unwrap());
    let req = get(&target, "/?size=100");
    let (done, retried, connections) =
        run_to_completion(&Http2::default(), &target, &req, 40, 4).await;
    assert!(done >= 40, "{done}");
    assert!(
        connections >= 8,
        "{connections} connections for 40 requests at 5 each"
    );
    assert!(
        retried > 0,
        "streams above the GOAWAY's last id are retried"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn h2_close_query_sends_goaway() {
    let server = serve(None);
    let target = target("http", server.http_addr().unwrap());
    let (conn, info) = Http2::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    assert_eq!(info.server_max_streams, Some(128));
    let resp = conn
        .send(&get(&target, "/?close=1"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    // The GOAWAY may trail the response by a moment.
    for _ in 0..100 {
        if !conn.accepts_requests() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(conn.close_cause(), CloseCause::Goaway);
    let next = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await;
    assert_eq!(next.err(), Some(SendError::Retry(RetryReason::Goaway(0))));
}

#[tokio::test(flavor = "current_thread")]
async fn h2_over_tls_trusts_the_servers_certificate() {
    let server = serve(None);
    let dir = std::env::temp_dir().join(format!("httpvs-protocol-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.ca_pem()).unwrap();
    let target = target("https", server.https_addr().unwrap());
    let (conn, info) = Http2::default()
        .connect(&target, &options(4, Some(&ca)))
        .await
        .unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"h2"[..]));
    let req = get(&target, "/?size=200000");
    for result in join_all((0..4).map(|_| conn.send(&req, std::time::Instant::now()))).await {
        assert_eq!(result.unwrap().body_bytes, 200_000);
    }
    let (h1, info) = Http1::default()
        .connect(&target, &options(1, Some(&ca)))
        .await
        .unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(
        h1.send(&req, std::time::Instant::now())
            .await
            .unwrap()
            .body_bytes,
        200_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}
