//! HTTP/3 client against `httpvs serve` in-process: every response kind, GOAWAY on `close=1` and
//! after N requests (the rest retried on new connections), and a server killed mid-request.

use bytes::Bytes;
use httpvs_load::protocol::h3::{H3Connection, H3Options, Http3};
use httpvs_load::protocol::{
    CloseCause, ConnectOptions, Connection, Protocol, RequestSpec, RetryReason, SendError, Target,
};
use httpvs_load::ErrorKind;
use httpvs_server::{Limits, RunningServer, ServeConfig};
use std::sync::Arc;
use std::time::Duration;

const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The in-process server with only its HTTP/3 listener on.
fn serve(limits: Limits) -> RunningServer {
    let config = ServeConfig {
        http: None,
        https: None,
        limits,
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).expect("server starts")
}

fn tls_trusting(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.expect("PEM")).expect("root cert");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// What a test needs to talk HTTP/3 to the server.
struct Client {
    target: Target,
    options: ConnectOptions,
    h3: Http3,
}

impl Client {
    fn new(server: &RunningServer, h3: H3Options) -> Client {
        let addr = server.h3_addr().expect("h3 listener");
        let target = Target {
            scheme: "https".into(),
            host: "localhost".into(),
            port: addr.port(),
            addr,
            dns: Duration::ZERO,
        };
        let options = ConnectOptions {
            connect_timeout: Duration::from_secs(5),
            tls: Some(tls_trusting(&server.ca_pem())),
            streams: 16,
            keepalive: true,
        };
        let h3 = Http3::new(&target, h3).expect("endpoint");
        Client {
            target,
            options,
            h3,
        }
    }

    async fn connect(&self) -> H3Connection {
        let (conn, info) = self
            .h3
            .connect(&self.target, &self.options)
            .await
            .expect("connects");
        assert_eq!(info.alpn.as_deref(), Some(&b"h3"[..]));
        conn
    }

    fn request(&self, method: http::Method, path: &str, body: Bytes) -> RequestSpec {
        RequestSpec {
            method,
            uri: format!("https://localhost:{}{path}", self.target.port)
                .parse()
                .expect("uri"),
            headers: Vec::new(),
            body,
        }
    }

    fn get(&self, path: &str) -> RequestSpec {
        self.request(http::Method::GET, path, Bytes::new())
    }
}

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test finished in time")
}

#[tokio::test]
async fn every_response_kind_over_h3() {
    let server = serve(Limits::default());
    let client = Client::new(&server, H3Options::default());
    bounded(async {
        let conn = client.connect().await;
        let root = conn
            .send(&client.get("/"), std::time::Instant::now())
            .await
            .expect("/");
        assert_eq!(root.status, 200);
        assert!(root.body_bytes > 0 && root.header_bytes > 0);

        let sized = conn
            .send(&client.get("/?size=100000"), std::time::Instant::now())
            .await
            .expect("size");
        assert_eq!((sized.status, sized.body_bytes), (200, 100_000));

        let status = conn
            .send(&client.get("/?status=503"), std::time::Instant::now())
            .await
            .expect("503");
        assert_eq!(status.status, 503);

        let body = Bytes::from(vec![b'x'; 50_000]);
        let echo = client.request(http::Method::POST, "/echo", body);
        let echoed = conn
            .send(&echo, std::time::Instant::now())
            .await
            .expect("echo");
        assert_eq!((echoed.status, echoed.body_bytes), (200, 50_000));

        assert!(conn.accepts_requests());
        assert_eq!(conn.close_cause(), CloseCause::Open);
        let wire = conn.wire();
        assert!(wire.received > 150_000, "{wire:?}");
        assert!(wire.header_sent > 0 && wire.header_received > 0, "{wire:?}");
        conn.close();
        assert_eq!(conn.close_cause(), CloseCause::Local);
    })
    .await;
}

/// Waits (bounded) until the connection has seen the server's GOAWAY.
async fn until_goaway(conn: &H3Connection) {
    while conn.accepts_requests() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn close_1_is_a_goaway_after_the_response() {
    let server = serve(Limits::default());
    let client = Client::new(&server, H3Options::default());
    bounded(async {
        let conn = client.connect().await;
        let answered = conn
            .send(&client.get("/?close=1"), std::time::Instant::now())
            .await
            .expect("answered");
        assert_eq!(answered.status, 200);
        until_goaway(&conn).await;
        assert_eq!(conn.close_cause(), CloseCause::Goaway);
        let after = conn.send(&client.get("/"), std::time::Instant::now()).await;
        assert_eq!(after.err(), Some(SendError::Retry(RetryReason::Goaway(0))));
    })
    .await;
}

#[tokio::test]
async fn goaway_after_n_requests_retries_the_rest_on_new_connections() {
    const PER_CONN: u64 = 5;
    const TOTAL: usize = 23;
    let limits = Limits {
        max_requests_per_conn: Some(PER_CONN),
        ..Limits::default()
    };
    let server = serve(limits);
    let client = Client::new(&server, H3Options::default());
    bounded(async {
        let req = client.get("/");
        let (mut done, mut retried, mut connections) = (0usize, 0usize, 0usize);
        while done < TOTAL {
            let conn = client.connect().await;
            connections += 1;
            // Everything still to do goes out at once, as `-m` streams on one connection.
            let sends = (0..TOTAL - done).map(|_| conn.send(&req, std::time::Instant::now()));
            let mut served_here = 0;
            for result in futures_util::future::join_all(sends).await {
                match result {
                    Ok(response) => {
                        assert_eq!(response.status, 200);
                        served_here += 1;
                    }
                    Err(SendError::Retry(_)) => retried += 1,
                    Err(SendError::Failed(kind)) => panic!("failed, not retried: {kind}"),
                }
            }
            assert!(served_here as u64 <= PER_CONN, "served {served_here}");
            assert!(served_here > 0, "no progress on connection {connections}");
            done += served_here;
            assert!(connections < 20, "too many connections");
        }
        assert_eq!(done, TOTAL);
        assert!(retried > 0, "GOAWAY never cut a request off");
        assert!(connections >= TOTAL.div_ceil(PER_CONN as usize));
    })
    .await;
}

#[tokio::test]
async fn a_server_killed_mid_request_is_a_classified_failure_not_a_hang() {
    let server = serve(Limits::default());
    let options = H3Options {
        idle_timeout: Duration::from_secs(2),
        ..H3Options::default()
    };
    let client = Client::new(&server, options);
    bounded(async {
        let conn = client.connect().await;
        let slow = client.get("/?delay=20s");
        let sends = futures_util::future::join_all(
            (0..3).map(|_| conn.send(&slow, std::time::Instant::now())),
        );
        let kill = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(server);
        };
        let (results, ()) = tokio::join!(sends, kill);
        for result in results {
            match result {
                Err(SendError::Failed(kind)) => assert!(
                    matches!(
                        kind,
                        ErrorKind::IdleTimeout
                            | ErrorKind::ConnectionClosed
                            | ErrorKind::H3(_)
                            | ErrorKind::QuicTransport(_)
                            | ErrorKind::Reset
                            // The reachability watch closed it: the port refuses.
                            | ErrorKind::Unreachable
                    ),
                    "unexpected kind {kind}"
                ),
                // A server that says GOAWAY before it dies leaves the request retryable.
                Err(SendError::Retry(_)) => {}
                Ok(r) => panic!("a 20 s delay cannot have been answered: {r:?}"),
            }
        }
        assert!(!conn.accepts_requests());
        assert_ne!(conn.close_cause(), CloseCause::Open);
    })
    .await;
}
