//! Runs a real nginx on 127.0.0.1 for interop tests: its own config, files, pid, logs and
//! temp paths in a temp dir, one process (`master_process off`), three free ports: HTTP/1.1,
//! h2c (prior knowledge) and TLS (ALPN h2 and http/1.1, self-signed certificate from rcgen).
//! The process is killed and the directory removed when the [`Nginx`] value drops.
//!
//! Locations served on every port:
//! - `/` answers [`NGINX_BODY`] with a Content-Length;
//! - `/chunked` answers [`CHUNKED_BODY_LEN`] bytes with `Transfer-Encoding: chunked` (h1);
//! - `/big` is a static file of [`BIG_BODY_LEN`] bytes;
//! - `/close` answers with `Connection: close` (h1);
//! - `/drop` closes the connection without answering (nginx's 444);
//! - `/status/404` answers 404.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long nginx may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The body nginx answers `/` with.
pub const NGINX_BODY: &str = "hello from nginx\n";
/// Length of the `/chunked` body.
pub const CHUNKED_BODY_LEN: usize = 10_000;
/// Length of the `/big` body.
pub const BIG_BODY_LEN: usize = 1 << 20;

/// Settings that tests vary.
#[derive(Debug, Clone)]
pub struct NginxOptions {
    /// `keepalive_requests`: requests per connection before nginx closes it (h1 `Connection:
    /// close`, h2 GOAWAY).
    pub keepalive_requests: u32,
    /// `http2_max_concurrent_streams`.
    pub max_concurrent_streams: u32,
}

impl Default for NginxOptions {
    fn default() -> Self {
        NginxOptions {
            keepalive_requests: 1000,
            max_concurrent_streams: 128,
        }
    }
}

/// A running nginx.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    h1_port: u16,
    h2c_port: u16,
    tls_port: u16,
}

impl Nginx {
    /// Starts the installed nginx with `options`; `None` when it is not installed (a skip, see
    /// [`crate::require_peer`]). An installed nginx that does not start fails the test.
    pub fn start_if_installed(options: NginxOptions) -> Option<Nginx> {
        let bin = crate::require_peer("nginx")?;
        match Nginx::start(&bin, &options) {
            Ok(nginx) => Some(nginx),
            Err(e) => panic!("nginx starts: {e:?}"),
        }
    }

    /// Starts `nginx` (the binary at `bin`) and waits until its three ports listen. The ports
    /// are picked free, then given to nginx; a test running beside may bind one in between
    /// (its own port 0), and nginx then exits on "Address already in use": it is started again
    /// on other ports, up to three times.
    pub fn start(bin: &Path, options: &NginxOptions) -> io::Result<Nginx> {
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::start_once(bin, options) {
                Err(e) if tries < 3 && e.to_string().contains("Address already in use") => {}
                result => return result,
            }
        }
    }

    fn start_once(bin: &Path, options: &NginxOptions) -> io::Result<Nginx> {
        let dir = unique_temp_dir()?;
        for sub in ["www", "tmp", "logs"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        write_content(&dir)?;
        let [h1_port, h2c_port, tls_port] = free_ports()?;
        let conf = config(&dir, options, [h1_port, h2c_port, tls_port]);
        std::fs::write(dir.join("nginx.conf"), conf)?;
        let log = std::fs::File::create(dir.join("logs/stderr.log"))?;
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            // Before it reads the config nginx opens its default error log; keep it here.
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut nginx = Nginx {
            child,
            dir,
            h1_port,
            h2c_port,
            tls_port,
        };
        nginx.wait_ready()?;
        Ok(nginx)
    }

    /// The HTTP/1.1 cleartext address.
    pub fn h1_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.h1_port))
    }

    /// The h2c (prior knowledge) address.
    pub fn h2c_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.h2c_port))
    }

    /// The TLS address (ALPN h2 and http/1.1).
    pub fn tls_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.tls_port))
    }

    /// The PEM certificate nginx serves (self-signed for 127.0.0.1 and localhost), for `--cacert`.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    /// nginx's error log so far (for assertion messages).
    pub fn log(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        read("logs/stderr.log") + &read("logs/error.log")
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let addrs = [self.h1_addr(), self.h2c_addr(), self.tls_addr()];
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "nginx exited with {status}: {}",
                    self.log()
                )));
            }
            // nginx writes its pid file once it holds every listener: until then a port that
            // answers may be another process's, which took it first (nginx then exits).
            let pid = std::fs::read_to_string(self.dir.join("nginx.pid")).unwrap_or_default();
            let holds_ports = pid.trim() == self.child.id().to_string();
            let listening = holds_ports
                && addrs
                    .iter()
                    .all(|a| TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok());
            if listening {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "nginx did not listen within {START_TIMEOUT:?}: {}",
                self.log()
            ),
        ))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_content(dir: &Path) -> io::Result<()> {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .map_err(io::Error::other)?;
    std::fs::write(dir.join("cert.pem"), cert.cert.pem())?;
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem())?;
    // `x` lines rewritten by sub_filter: nginx then cannot know the length and chunks it.
    let line = "x".repeat(99) + "\n";
    std::fs::write(
        dir.join("www/chunked.txt"),
        line.repeat(CHUNKED_BODY_LEN / 100),
    )?;
    std::fs::write(dir.join("www/big.bin"), vec![b'b'; BIG_BODY_LEN])?;
    Ok(())
}

fn config(dir: &Path, options: &NginxOptions, ports: [u16; 3]) -> String {
    let [h1, h2c, tls] = ports;
    let d = dir.display();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    default_type application/octet-stream;
    keepalive_requests {keepalive};
    http2_max_concurrent_streams {streams};
    server {{
        listen 127.0.0.1:{h1};
        listen 127.0.0.1:{h2c} http2;
        listen 127.0.0.1:{tls} ssl http2;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        root {d}/www;
        location = / {{ return 200 "{body}"; }}
        location = /chunked {{
            default_type text/plain;
            sub_filter_types *;
            sub_filter_once off;
            sub_filter "x" "y";
            try_files /chunked.txt =404;
        }}
        location = /big {{ try_files /big.bin =404; }}
        location = /close {{ keepalive_timeout 0; return 200 "closing\n"; }}
        location = /drop {{ return 444; }}
        location = /status/404 {{ return 404 "not here\n"; }}
    }}
}}
"#,
        keepalive = options.keepalive_requests,
        streams = options.max_concurrent_streams,
        body = NGINX_BODY.replace('\n', "\\n"),
    )
}

/// Three distinct free ports: each listener stays bound until all are picked (one bound and
/// dropped at a time, the same port could come back twice: nginx's "duplicate listen").
fn free_ports() -> io::Result<[u16; 3]> {
    let bind = || TcpListener::bind((Ipv4Addr::LOCALHOST, 0));
    let held = [bind()?, bind()?, bind()?];
    Ok([
        held[0].local_addr()?.port(),
        held[1].local_addr()?.port(),
        held[2].local_addr()?.port(),
    ])
}

fn unique_temp_dir() -> io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("httpvs-nginx-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
