//! Set-up shared by the binary's end-to-end tests.
// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// An empty directory `name` under cargo's per-test temp dir, emptied first if an earlier run
/// left it, so a test's files (plans, reports, CA) are its own and kept for a look afterwards.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Starts `httpvs serve ARGS` and reads its banner through the last line it prints for these
/// listeners (the certificate line when TLS is on, else the first address). Returns the
/// server, the rest of its stdout, and the banner. A listener the arguments leave out binds
/// port 0, never `serve`'s fixed default (another test, or another server on this machine,
/// may hold it).
pub fn spawn_serve(args: &[&str]) -> (Child, BufReader<ChildStdout>, String) {
    let off = |flag: &str| args.windows(2).any(|w| w[0] == flag && w[1] == "off");
    let tls = !off("--https") || !off("--h3");
    let unset = ["--http", "--https", "--h3"]
        .into_iter()
        .filter(|flag| !args.contains(flag))
        .flat_map(|flag| [flag, "127.0.0.1:0"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .arg("serve")
        .args(args)
        .args(unset)
        .stdout(Stdio::piped())
        .spawn()
        .expect("httpvs serve starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let last = if tls { "cert" } else { "://" };
    let mut banner = String::new();
    while !banner.contains(last) {
        if stdout.read_line(&mut banner).expect("banner") == 0 {
            break;
        }
    }
    (child, stdout, banner)
}

/// Serves `HTTP/1.1 200` with an empty body to every request on up to 4 connections for 10 s,
/// sending each request head it reads to the returned channel.
pub fn head_recorder() -> (std::net::SocketAddr, std::sync::mpsc::Receiver<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(4) {
            let Ok(mut conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = conn.read(&mut chunk) {
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = buf.drain(..end + 4).collect();
                        let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if conn.write_all(ok).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, rx)
}
