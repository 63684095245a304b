//! Shared setup for the protocol tests: targets, requests and options for a loopback peer.

#![allow(dead_code)] // Each test file uses a different subset.

use bytes::Bytes;
use httpvs_load::protocol::tls::client_config;
use httpvs_load::protocol::{ConnectOptions, RequestSpec, Target};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// A target for `scheme://127.0.0.1:PORT`.
pub fn target(scheme: &str, addr: SocketAddr) -> Target {
    Target {
        scheme: scheme.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
        addr,
        dns: Duration::ZERO,
    }
}

/// A GET for `path` on `target`.
pub fn get(target: &Target, path: &str) -> RequestSpec {
    request(target, http::Method::GET, path, Bytes::new())
}

/// A request with `method` and `body` for `path` on `target`.
pub fn request(target: &Target, method: http::Method, path: &str, body: Bytes) -> RequestSpec {
    let uri = format!("{}://{}:{}{path}", target.scheme, target.host, target.port);
    RequestSpec {
        method,
        uri: uri.parse().expect("test URI"),
        headers: vec![],
        body,
    }
}

/// Options with `streams` per connection, keep-alive on, and TLS trusting `cacert` if given.
pub fn options(streams: u32, cacert: Option<&Path>) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(5),
        tls: cacert.map(|ca| client_config(false, Some(ca), &[]).expect("CA file loads")),
        streams,
        keepalive: true,
    }
}
