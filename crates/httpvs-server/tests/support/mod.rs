//! Shared by the server's integration tests: start the real server on port 0, run curl, speak raw
//! HTTP/2 frames.
#![allow(dead_code)]

pub mod raw_h2;

use httpvs_server::{H2Engine, Limits, RunningServer, ServeConfig};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The server on 127.0.0.1 ephemeral ports with these limits.
pub fn server(limits: Limits) -> RunningServer {
    let config = ServeConfig {
        limits,
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).expect("server starts")
}

/// The server with these limits on the given HTTP/2 engine.
pub fn server_on(limits: Limits, h2_engine: H2Engine) -> RunningServer {
    let config = ServeConfig {
        limits,
        h2_engine,
        ..ServeConfig::loopback_ephemeral()
    };
    httpvs_server::start(config).expect("server starts")
}

/// `http://127.0.0.1:PORT`.
pub fn http_base(server: &RunningServer) -> String {
    format!("http://{}", server.http_addr().unwrap())
}

/// `https://localhost:PORT` (the self-signed cert names localhost).
pub fn https_base(server: &RunningServer) -> String {
    format!("https://localhost:{}", server.https_addr().unwrap().port())
}

/// A fresh temporary directory for this test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("httpvs-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the server's CA to `dir/ca.pem` and returns the path.
pub fn write_ca(server: &RunningServer, dir: &Path) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, server.ca_pem()).unwrap();
    path
}

/// Runs curl with `args`, bounded by --max-time.
pub fn curl(curl: &Path, args: &[&str]) -> Output {
    Command::new(curl)
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl runs")
}

/// curl's stdout as text, asserting success.
pub fn curl_ok(bin: &Path, args: &[&str]) -> String {
    let out = curl(bin, args);
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
