//! HTTP/2 protocol behaviour against a real nginx: h2c and h2 over TLS, the server's stream
//! limit, GOAWAY after keepalive_requests, stream resets, header accounting, ALPN refusal.

mod protocol_support;

use futures_util::future::join_all;
use httpvs_load::protocol::h1::Http1;
use httpvs_load::protocol::h2::Http2;
use httpvs_load::protocol::{CloseCause, Connection, Protocol, RetryReason, SendError};
use httpvs_load::ErrorKind;
use httpvs_testkit::nginx::{Nginx, NginxOptions, BIG_BODY_LEN, CHUNKED_BODY_LEN, NGINX_BODY};
use protocol_support::{get, options, request, target};

#[tokio::test(flavor = "current_thread")]
async fn h2c_multiplexes_requests_on_one_connection() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h2c_addr());
    let (conn, info) = Http2::default()
        .connect(&target, &options(16, None))
        .await
        .unwrap();
    assert_eq!(info.server_max_streams, Some(128));
    assert!(info.alpn.is_none());
    let paths = ["/", "/chunked", "/big", "/status/404"];
    let reqs: Vec<_> = (0..16).map(|i| get(&target, paths[i % 4])).collect();
    let results = join_all(reqs.iter().map(|r| conn.send(r, std::time::Instant::now()))).await;
    for (i, result) in results.into_iter().enumerate() {
        let resp = result.unwrap();
        let (status, len) = match paths[i % 4] {
            "/" => (200, NGINX_BODY.len()),
            "/chunked" => (200, CHUNKED_BODY_LEN),
            "/big" => (200, BIG_BODY_LEN),
            _ => (404, "not here\n".len()),
        };
        assert_eq!((resp.status, resp.body_bytes), (status, len as u64));
        assert!(resp.header_bytes > 10);
    }
    assert!(conn.accepts_requests());
    let wire = conn.wire();
    assert!(wire.header_sent > 0 && wire.header_received > 0, "{wire:?}");
    assert!(wire.received > 4 * BIG_BODY_LEN as u64, "{wire:?}");
    conn.close();
    assert_eq!(conn.close_cause(), CloseCause::Local);
}

#[tokio::test(flavor = "current_thread")]
async fn h2_over_tls_negotiates_alpn_h2() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("https", nginx.tls_addr());
    let opts = options(4, Some(&nginx.cert_path()));
    let (conn, info) = Http2::default().connect(&target, &opts).await.unwrap();
    assert_eq!(info.alpn.as_deref(), Some(&b"h2"[..]));
    assert!(!info.handshake.is_zero());
    let body = bytes::Bytes::from(vec![b'p'; 100_000]);
    let post = request(&target, http::Method::POST, "/", body);
    // nginx answers a POST to a `return` location at once and stops the upload with
    // RST_STREAM(NO_ERROR), which ends the exchange normally.
    let resp = conn.send(&post, std::time::Instant::now()).await.unwrap();
    assert_eq!(resp.status, 200);
    assert!(
        conn.wire().sent > 16_384,
        "at least one full DATA frame left"
    );
    let resp = conn
        .send(&get(&target, "/big"), std::time::Instant::now())
        .await
        .unwrap();
    assert_eq!(resp.body_bytes, BIG_BODY_LEN as u64);
}

#[tokio::test(flavor = "current_thread")]
async fn server_stream_limit_is_reported_and_honoured() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions {
        max_concurrent_streams: 2,
        ..NginxOptions::default()
    }) else {
        return;
    };
    let target = target("http", nginx.h2c_addr());
    let (conn, info) = Http2::default()
        .connect(&target, &options(8, None))
        .await
        .unwrap();
    assert_eq!(info.server_max_streams, Some(2));
    let req = get(&target, "/chunked");
    for result in join_all((0..8).map(|_| conn.send(&req, std::time::Instant::now()))).await {
        assert_eq!(result.unwrap().body_bytes, CHUNKED_BODY_LEN as u64);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn goaway_after_keepalive_requests_retries_the_rest() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions {
        keepalive_requests: 10,
        ..NginxOptions::default()
    }) else {
        return;
    };
    let target = target("http", nginx.h2c_addr());
    let protocol = Http2::default();
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
                    Err(SendError::Retry(RetryReason::Goaway(_) | RetryReason::Refused)) => {
                        retried += 1
                    }
                    Err(e) => panic!("unexpected {e:?} after {done}"),
                }
            }
        }
        if done < 50 {
            assert_eq!(conn.close_cause(), CloseCause::Goaway);
        }
    }
    assert!(
        connections >= 5,
        "nginx sends GOAWAY every 10 streams: {connections}"
    );
    assert!(
        retried > 0,
        "streams above the GOAWAY's last id are retried"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn stream_reset_is_a_classified_failure() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h2c_addr());
    let (conn, _) = Http2::default()
        .connect(&target, &options(1, None))
        .await
        .unwrap();
    // nginx's 444 ("close without a response") resets the stream on h2.
    let err = conn
        .send(&get(&target, "/drop"), std::time::Instant::now())
        .await
        .err();
    match err {
        Some(SendError::Failed(ErrorKind::StreamReset(_))) => {}
        other => panic!("expected RST_STREAM, got {other:?}"),
    }
    // The connection survives a stream reset.
    assert!(conn
        .send(&get(&target, "/"), std::time::Instant::now())
        .await
        .is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn hpack_makes_repeated_heads_smaller_than_http11() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    const N: u64 = 20;
    let h1_target = target("http", nginx.h1_addr());
    let (h1, _) = Http1::default()
        .connect(&h1_target, &options(1, None))
        .await
        .unwrap();
    let h2_target = target("http", nginx.h2c_addr());
    let (h2, _) = Http2::default()
        .connect(&h2_target, &options(1, None))
        .await
        .unwrap();
    let mut decoded = 0;
    for _ in 0..N {
        h1.send(&get(&h1_target, "/"), std::time::Instant::now())
            .await
            .unwrap();
        decoded += h2
            .send(&get(&h2_target, "/"), std::time::Instant::now())
            .await
            .unwrap()
            .header_bytes;
    }
    let (w1, w2) = (h1.wire(), h2.wire());
    assert!(w2.header_sent < w1.header_sent / 2, "h1 {w1:?} h2 {w2:?}");
    assert!(
        w2.header_received < w1.header_received,
        "h1 {w1:?} h2 {w2:?}"
    );
    // HPACK's space savings are positive for repeated responses.
    assert!(w2.header_received < decoded, "{w2:?} decoded {decoded}");
    assert!(w2.sent < w1.sent, "h1 {w1:?} h2 {w2:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn h2c_to_an_http11_port_fails_cleanly() {
    let Some(nginx) = Nginx::start_if_installed(NginxOptions::default()) else {
        return;
    };
    let target = target("http", nginx.h1_addr());
    let result = Http2::default().connect(&target, &options(1, None)).await;
    let err = result.err().expect("an HTTP/1.1 port does not speak h2c");
    assert!(
        matches!(
            err,
            ErrorKind::ConnectionClosed | ErrorKind::Protocol | ErrorKind::Reset
        ),
        "{err:?}"
    );
}
