//! HTTP/1.1 protocol behaviour against a real nginx: keep-alive, `--no-keepalive`, pipelining,
//! chunked and sized bodies, `Connection: close`, keep-alive limits, TLS, and error mapping.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h1::Http1;
use httpvs_load::protocol::{CloseCause, Connection, Protocol, RetryReason, SendError};
use httpvs_load::ErrorKind;
use httpvs_testkit::nginx::{Nginx, NginxOptions, BIG_BODY_LEN, CHUNKED_BODY_LEN, NGINX_BODY};
use protocol_support::{get, options, request, target};

#[tokio::test(flavor = "current_thread")]
async fn keep_alive_reuses_one_connection() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let (conn, info) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    assert!(info.alpn.is_none());
    let req = get(&target, "/");
    for _ in 0..5 {
        let resp = conn.send(&req, std::time::Instant::now()).await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body_bytes, NGINX_BODY.len() as u64);
        assert!(!resp.close_requested);
        assert!(resp.header_bytes > 0);
    }
    assert!(conn.accepts_requests());
    assert_eq!(conn.close_cause(), CloseCause::Open);
    let wire = conn.wire();
    assert!(
        wire.header_sent > 0 && wire.header_sent == wire.sent,
        "{wire:?}"
    );
    assert_eq!(
        wire.received,
        wire.header_received + 5 * NGINX_BODY.len() as u64,
        "{wire:?}"
    );
    conn.close();
    assert_eq!(conn.close_cause(), CloseCause::Local);
    assert!(!conn.accepts_requests());
}

#[tokio::test(flavor = "current_thread")]
async fn no_keepalive_uses_a_connection_once() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let mut opts = options(1, None);
    opts.keepalive = false;
    let (conn, _) = Http1::default().connect(&target, &opts).await.unwrap();
    let resp = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert!(resp.close_requested, "nginx echoes Connection: close");
    assert_eq!(conn.close_cause(), CloseCause::Local);
    assert!(!conn.accepts_requests());
    let again = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await;
    assert_eq!(
        again.unwrap_err(),
        SendError::Retry(RetryReason::ConnectionClosed)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn pipelined_requests_answer_in_order() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let (conn, _) = Http1::default()
        .connect(&target, &options(8, None))
        .await
        .unwrap();
    let paths = [
        "/",
        "/chunked",
        "/status/404",
        "/big",
        "/",
        "/chunked",
        "/",
        "/status/404",
    ];
    let reqs: Vec<_> = paths.iter().map(|p| get(&target, p)).collect();
    let results = join_all(reqs.iter().map(|r| conn.send(r, std::time::Instant::now()))).await;
    for (path, result) in paths.iter().zip(results) {
        let resp = result.unwrap();
        let (status, len) = match *path {
            "/" => (200, NGINX_BODY.len()),
            "/chunked" => (200, CHUNKED_BODY_LEN),
            "/big" => (200, BIG_BODY_LEN),
            _ => (404, "not here\n".len()),
        };
        assert_eq!(
            (resp.status, resp.body_bytes),
            (status, len as u64),
            "{path}"
        );
    }
    assert!(conn.accepts_requests());
}

#[tokio::test(flavor = "current_thread")]
async fn head_requests_have_no_body() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let (conn, _) = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    let head = request(&target, http::Method::HEAD, "/big", bytes::Bytes::new());
    let resp = conn.send(&head, std::time::Instant::now()).await.unwrap();
    assert_eq!((resp.status, resp.body_bytes), (200, 0));
    // The connection is still in sync: the next response parses.
    let resp = conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.body_bytes, NGINX_BODY.len() as u64);
}

#[tokio::test(flavor = "current_thread")]
async fn connection_close_retires_and_retries_the_pipeline() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let (conn, _) = Http1::default()
        .connect(&target, &options(3, None))
        .await
        .unwrap();
    let reqs = [get(&target, "/close"), get(&target, "/"), get(&target, "/")];
    let results = join_all(reqs.iter().map(|r| conn.send(r, std::time::Instant::now()))).await;
    let first = results[0].as_ref().unwrap();
    assert!(first.close_requested);
    for later in &results[1..] {
        assert_eq!(
            later.err(),
            Some(SendError::Retry(RetryReason::ConnectionClosed))
        );
    }
    assert_eq!(conn.close_cause(), CloseCause::ConnectionClose);
    assert!(!conn.accepts_requests());
}

#[tokio::test(flavor = "current_thread")]
async fn keepalive_requests_limit_costs_retries_not_failures() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions {
        keepalive_requests: 10,
        ..NginxOptions::default()
    }) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let protocol = Http1::default();
    let opts = options(4, None);
    let req = get(&target, "/");
    let (mut done, mut retried, mut connections) = (0, 0, 0);
    while done < 50 {
        let (conn, _) = protocol.connect(&target, &opts).await.unwrap();
        connections += 1;
        while conn.accepts_requests() && done < 50 {
            for result in join_all((0..4).map(|_| conn.send(&req, std::time::Instant::now()))).await
            {
                match result {
                    Ok(resp) => {
                        assert_eq!(resp.status, 200);
                        done += 1;
                    }
                    Err(SendError::Retry(RetryReason::ConnectionClosed)) => retried += 1,
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
        }
        if done < 50 {
            assert_eq!(conn.close_cause(), CloseCause::ConnectionClose);
        }
    }
    assert!(
        connections >= 5,
        "nginx closes every 10 requests: {connections}"
    );
    assert!(
        retried > 0,
        "pipelined requests behind the 10th are retried"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn dropped_connections_fail_first_requests_and_retry_reused_ones() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let protocol = Http1::default();
    let (conn, _) = protocol.connect(&target, &options(1, None)).await.unwrap();
    let first = conn
        .send(&get(&target, "/drop"), std::time::Instant::now())
        .await;
    assert_eq!(
        first.err(),
        Some(SendError::Failed(ErrorKind::ConnectionClosed))
    );
    assert_eq!(conn.close_cause(), CloseCause::Fin);

    let (conn, _) = protocol.connect(&target, &options(1, None)).await.unwrap();
    conn.send(&get(&target, "/"), std::time::Instant::now())
        .await
        .unwrap();
    let reused = conn
        .send(&get(&target, "/drop"), std::time::Instant::now())
        .await;
    assert_eq!(
        reused.err(),
        Some(SendError::Retry(RetryReason::ConnectionClosed))
    );

    // nginx processed the request before it dropped the connection (`return 444`): a POST,
    // which is not idempotent, fails rather than reaching the server twice; a POST with an
    // Idempotency-Key may go again, as with Go's client (RFC 9110 §9.2.2).
    let post = |key: Option<&str>| {
        let mut spec = request(
            &target,
            http::Method::POST,
            "/drop",
            bytes::Bytes::from_static(b"x"),
        );
        if let Some(key) = key {
            spec.headers.push((
                http::HeaderName::from_static("idempotency-key"),
                http::HeaderValue::from_str(key).unwrap(),
            ));
        }
        spec
    };
    for (key, expected) in [
        (None, SendError::Failed(ErrorKind::ConnectionClosed)),
        (Some("k1"), SendError::Retry(RetryReason::ConnectionClosed)),
    ] {
        let (conn, _) = protocol.connect(&target, &options(1, None)).await.unwrap();
        conn.send(&get(&target, "/"), std::time::Instant::now())
            .await
            .unwrap();
        let dropped = conn.send(&post(key), std::time::Instant::now()).await;
        assert_eq!(dropped.err(), Some(expected), "Idempotency-Key {key:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn posts_behind_a_connection_close_are_resent() {
    // nginx says `Connection: close` on its 2nd response: the pipelined POSTs behind it were
    // never processed, so they go again whatever their method.
    let Some(nginx) = Nginx::start_if_installed(NginxOptions {
        keepalive_requests: 2,
        ..NginxOptions::default()
    }) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let (conn, _) = Http1::default()
        .connect(&target, &options(4, None))
        .await
        .unwrap();
    let post = request(
        &target,
        http::Method::POST,
        "/",
        bytes::Bytes::from_static(b"x"),
    );
    let now = std::time::Instant::now();
    let outcomes = join_all((0..4).map(|_| conn.send(&post, now))).await;
    let errors: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        2,
        "{errors:?}"
    );
    assert_eq!(
        errors,
        [&SendError::Retry(RetryReason::ConnectionClosed); 2],
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn tls_negotiates_http11() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("https", nginx.tls_addr());
    let opts = options(1, Some(&nginx.cert_path()));
    let (conn, info) = Http1::default().connect(&target, &opts).await.unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert!(!info.handshake.is_zero());
    let resp = conn
        .send(&get(&target, "/chunked"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.body_bytes, CHUNKED_BODY_LEN as u64);
    let wire = conn.wire();
    // TLS records cost more than the plaintext they carry.
    assert!(
        wire.received > wire.header_received + CHUNKED_BODY_LEN as u64,
        "{wire:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn untrusted_certificates_are_tls_errors() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("https", nginx.tls_addr());
    let mut opts = options(1, None);
    opts.tls = Some(httpvs_load::protocol::tls::client_config(false, None, &[]).unwrap());
    let err = Http1::default().connect(&target, &opts).await.err();
    assert_eq!(err, Some(ErrorKind::Tls));
    opts.tls = Some(httpvs_load::protocol::tls::client_config(true, None, &[]).unwrap());
    assert!(
        Http1::default().connect(&target, &opts).await.is_ok(),
        "-k accepts it"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn refused_port_is_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // The listener is dropped: nothing listens there now.
    let target = target("http", port);
    let err = Http1::default()
        .connect(&target, &options(1, None))
        .await
        .err();
    assert_eq!(err, Some(ErrorKind::Refused));
}
