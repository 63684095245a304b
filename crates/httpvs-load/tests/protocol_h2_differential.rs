//! The owned HTTP/2 codec against the `h2` crate's client (`Http2Reference`): the same
//! workload on each, against `httpvs serve` and nginx, over h2c and TLS, must give the same
//! successes, statuses, body bytes and decoded header bytes.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h2::{Http2, Http2Reference};
use httpvs_load::protocol::window::ReceiveWindows;
use httpvs_load::protocol::{Connection, Protocol, RequestSpec, SendError, Target};
use httpvs_server::{start, ServeConfig};
use httpvs_testkit::nginx::{Nginx, NginxOptions};
use httpvs_testkit::require_peer;
use protocol_support::{get, options, request, target};
use std::collections::BTreeMap;
use std::path::Path;

/// What a workload came to, in the terms the report counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    succeeded: u64,
    statuses: BTreeMap<u16, u64>,
    body_bytes: u64,
    header_bytes: u64,
    failures: BTreeMap<String, u64>,
}

/// Sends every request of `reqs` `rounds` times, `depth` at once, reconnecting when a
/// connection stops accepting (GOAWAY churn); retried requests are sent again.
async fn run<P: Protocol>(
    protocol: &P,
    target: &Target,
    ca: Option<&Path>,
    reqs: &[RequestSpec],
    rounds: usize,
    depth: usize,
) -> Outcome {
    let opts = options(depth as u32, ca);
    let mut todo: Vec<&RequestSpec> = (0..rounds).flat_map(|_| reqs.iter()).collect();
    todo.reverse();
    let mut out = Outcome::default();
    while !todo.is_empty() {
        let (conn, _) = protocol.connect(target, &opts).await.expect("connects");
        while conn.accepts_requests() && !todo.is_empty() {
            let batch: Vec<&RequestSpec> = (0..depth).filter_map(|_| todo.pop()).collect();
            let results = join_all(
                batch
                    .iter()
                    .map(|r| conn.send(r, std::time::Instant::now())),
            )
            .await;
            for (req, result) in batch.into_iter().zip(results) {
                match result {
                    Ok(resp) => {
                        out.succeeded += 1;
                        *out.statuses.entry(resp.status).or_default() += 1;
                        out.body_bytes += resp.body_bytes;
                        out.header_bytes += resp.header_bytes;
                    }
                    Err(SendError::Retry(_)) => todo.push(req),
                    Err(SendError::Failed(kind)) => {
                        *out.failures.entry(format!("{kind:?}")).or_default() += 1
                    }
                }
            }
        }
        conn.close();
    }
    out
}

async fn compare(target: &Target, ca: Option<&Path>, reqs: &[RequestSpec], depth: usize) {
    compare_with(target, ca, reqs, depth, 25, ReceiveWindows::default()).await;
}

/// As `compare`, `rounds` times, with both clients advertising `windows`.
async fn compare_with(
    target: &Target,
    ca: Option<&Path>,
    reqs: &[RequestSpec],
    depth: usize,
    rounds: usize,
    windows: ReceiveWindows,
) {
    let owned_client = Http2::default().with_windows(windows);
    let owned = run(&owned_client, target, ca, reqs, rounds, depth).await;
    let reference_client = Http2Reference::default().with_windows(windows);
    let reference = run(&reference_client, target, ca, reqs, rounds, depth).await;
    assert_eq!(
        owned, reference,
        "owned codec vs h2 crate on {} with {windows:?}",
        target.addr
    );
    assert_eq!(owned.succeeded, (rounds * reqs.len()) as u64);
}

/// A 16 KiB stream window and HTTP/2's smallest connection window.
const SMALL_WINDOWS: ReceiveWindows = ReceiveWindows {
    stream: Some(16 << 10),
    connection: Some(65_535),
};

fn serve_requests(target: &Target) -> Vec<RequestSpec> {
    let body = bytes::Bytes::from(vec![b'u'; 100_000]);
    vec![
        get(target, "/?size=100"),
        get(target, "/?size=70000"),
        get(target, "/?size=0"),
        get(target, "/?status=404"),
        request(target, http::Method::POST, "/?size=10", body),
    ]
}

#[tokio::test(flavor = "current_thread")]
async fn owned_and_reference_agree_against_httpvs_serve() {
    let mut config = ServeConfig::loopback_ephemeral();
    config.h3 = None;
    // A GOAWAY every 7 requests: both clients must end with the same successes.
    config.limits.max_requests_per_conn = Some(7);
    let server = start(config).expect("httpvs serve starts");
    let h2c = target("http", server.http_addr().unwrap());
    compare(&h2c, None, &serve_requests(&h2c), 8).await;

    let dir = std::env::temp_dir().join(format!("httpvs-h2-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.ca_pem()).unwrap();
    let tls = target("https", server.https_addr().unwrap());
    compare(&tls, Some(&ca), &serve_requests(&tls), 4).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "current_thread")]
async fn owned_and_reference_agree_with_small_windows() {
    let mut config = ServeConfig::loopback_ephemeral();
    config.h3 = None;
    let server = start(config).expect("httpvs serve starts");
    let h2c = target("http", server.http_addr().unwrap());
    let mut reqs = serve_requests(&h2c);
    reqs.push(get(&h2c, "/?size=1m"));
    compare_with(&h2c, None, &reqs, 4, 5, SMALL_WINDOWS).await;
}

#[tokio::test(flavor = "current_thread")]
async fn owned_and_reference_agree_against_nginx() {
    let Some(bin) = require_peer("nginx") else {
        return;
    };
    let nginx = Nginx::start(&bin, &NginxOptions::default()).expect("nginx starts");
    let paths = ["/", "/chunked", "/big", "/status/404"];
    let h2c = target("http", nginx.h2c_addr());
    let reqs: Vec<_> = paths.iter().map(|p| get(&h2c, p)).collect();
    compare(&h2c, None, &reqs, 16).await;
    let tls = target("https", nginx.tls_addr());
    let reqs: Vec<_> = paths.iter().map(|p| get(&tls, p)).collect();
    compare(&tls, Some(&nginx.cert_path()), &reqs, 16).await;
    let ca = nginx.cert_path();
    compare_with(&tls, Some(&ca), &reqs, 16, 3, SMALL_WINDOWS).await;
}
