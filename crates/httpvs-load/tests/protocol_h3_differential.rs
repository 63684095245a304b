//! The owned HTTP/3 client against the h3 crate's (`H3Engine::Reference`): the same workload on
//! each, against `httpvs serve` (with GOAWAY churn) and caddy, must give the same successes,
//! statuses, body bytes and decoded header bytes.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h3::{H3Connection, H3Engine, H3Options, Http3};
use httpvs_load::protocol::{
    ConnectInfo, ConnectOptions, Connection, Protocol, RequestSpec, SendError, Target,
};
use httpvs_server::{start, ServeConfig};
use httpvs_testkit::caddy::Caddy;
use protocol_support::{get, options, request, target};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a workload came to, in the terms the report counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    succeeded: u64,
    statuses: BTreeMap<u16, u64>,
    body_bytes: u64,
    header_bytes: u64,
    failures: BTreeMap<String, u64>,
}

/// Connects; the first connection of a run gets two more tries half a second apart (a peer
/// that just started, on a loaded machine, may not answer QUIC at once). Panics with the error.
async fn connect(
    protocol: &Http3,
    target: &Target,
    opts: &ConnectOptions,
    first: bool,
) -> (H3Connection, ConnectInfo) {
    let tries = if first { 3 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        match protocol.connect(target, opts).await {
            Ok(connected) => return connected,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("connects: {last:?}");
}

/// Sends every request of `reqs` `rounds` times, `depth` at once, reconnecting when a
/// connection stops accepting (GOAWAY churn); retried requests are sent again.
async fn run(
    engine: H3Engine,
    target: &Target,
    ca: &Path,
    reqs: &[RequestSpec],
    rounds: usize,
    depth: usize,
) -> Outcome {
    let protocol = Http3::new(target, H3Options::default())
        .expect("endpoint")
        .with_engine(engine);
    let opts = options(depth as u32, Some(ca));
    let mut todo: Vec<&RequestSpec> = (0..rounds).flat_map(|_| reqs.iter()).collect();
    todo.reverse();
    let mut out = Outcome::default();
    let mut first = true;
    while !todo.is_empty() {
        let (conn, _) = connect(&protocol, target, &opts, first).await;
        first = false;
        assert_eq!(conn.engine(), engine);
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

async fn compare(target: &Target, ca: &Path, reqs: &[RequestSpec], depth: usize) {
    let both = async {
        let owned = run(H3Engine::Owned, target, ca, reqs, 20, depth).await;
        let reference = run(H3Engine::Reference, target, ca, reqs, 20, depth).await;
        (owned, reference)
    };
    let (owned, reference) = tokio::time::timeout(TEST_TIMEOUT, both)
        .await
        .expect("both workloads finish");
    assert_eq!(
        owned, reference,
        "owned h3 client vs h3 crate on {}",
        target.addr
    );
    assert_eq!(owned.succeeded, 20 * reqs.len() as u64);
}

#[tokio::test(flavor = "current_thread")]
async fn owned_and_reference_agree_against_httpvs_serve() {
    let mut config = ServeConfig::loopback_ephemeral();
    config.http = None;
    config.https = None;
    // A GOAWAY every 7 requests: both clients must end with the same successes.
    config.limits.max_requests_per_conn = Some(7);
    let server = start(config).expect("httpvs serve starts");
    let h3 = target("https", server.h3_addr().expect("h3 listener"));
    let dir = std::env::temp_dir().join(format!("httpvs-h3-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.ca_pem()).expect("CA written");
    let body = bytes::Bytes::from(vec![b'u'; 100_000]);
    let reqs = vec![
        get(&h3, "/?size=100"),
        get(&h3, "/?size=70000"),
        get(&h3, "/?size=0"),
        get(&h3, "/?status=404"),
        get(&h3, "/?header=x-extra:some-value"),
        request(&h3, http::Method::POST, "/?size=10", body),
    ];
    compare(&h3, &ca, &reqs, 8).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "current_thread")]
async fn owned_and_reference_agree_against_caddy() {
    let Some(caddy) = Caddy::start_if_installed() else {
        return;
    };
    let h3 = target("https", caddy.addr());
    let reqs = vec![get(&h3, "/"), get(&h3, "/status/404")];
    compare(&h3, &caddy.root_ca_path(), &reqs, 16).await;
}
