//! Runs a real caddy (HTTP/1.1, h2 and HTTP/3) on 127.0.0.1 for interop tests: its own Caddyfile,
//! certificates and storage in a temp dir, a free port for both TCP and UDP, no admin endpoint.
//! The process is killed and the directory removed when the [`Caddy`] value drops.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long caddy may take to issue its internal certificate and listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The body caddy answers `/` with.
pub const CADDY_BODY: &str = "hello from caddy";

/// A running caddy serving `https://127.0.0.1:PORT/` over TCP (h1, h2) and UDP (h3).
pub struct Caddy {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Caddy {
    /// Starts the installed caddy; `None` when it is not installed (a skip, see
    /// [`crate::require_peer`]). An installed caddy that does not start fails the test.
    pub fn start_if_installed() -> Option<Caddy> {
        let bin = crate::require_peer("caddy")?;
        match Caddy::start(&bin) {
            Ok(caddy) => Some(caddy),
            Err(e) => panic!("caddy starts: {e:?}"),
        }
    }

    /// Starts `caddy` (the binary at `bin`) and waits until both its TCP and UDP sockets listen.
    /// The port is picked free, then given to caddy; a test running beside may bind it in
    /// between, and caddy then exits on "address already in use": it is started again on
    /// another port, up to three times. So is a caddy that did not listen in time: caddy 2.6's
    /// storage cleaner can delete the certificate it is writing ("Deleting certificates/local/
    /// 127.0.0.1 because key is empty"), and caddy then retries only after 60 s.
    pub fn start(bin: &Path) -> io::Result<Caddy> {
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::start_once(bin) {
                Err(e)
                    if tries < 3
                        && (e.kind() == io::ErrorKind::TimedOut
                            || e.to_string().contains("address already in use")) => {}
                result => return result,
            }
        }
    }

    fn start_once(bin: &Path) -> io::Result<Caddy> {
        let dir = unique_temp_dir("caddy")?;
        let port = free_tcp_and_udp_port()?;
        std::fs::write(dir.join("Caddyfile"), caddyfile(&dir, port))?;
        let log = std::fs::File::create(dir.join("caddy.log"))?;
        let child = Command::new(bin)
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(dir.join("Caddyfile"))
            // caddy writes autosave.json and, without `storage`, certificates under these.
            .env("HOME", &dir)
            .env("XDG_DATA_HOME", dir.join("xdg-data"))
            .env("XDG_CONFIG_HOME", dir.join("xdg-config"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut caddy = Caddy { child, dir, port };
        caddy.wait_ready()?;
        Ok(caddy)
    }

    /// The port caddy listens on (TCP and UDP).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The loopback address caddy listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `https://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    /// The PEM file of caddy's internal root CA, for `--cacert`.
    pub fn root_ca_path(&self) -> PathBuf {
        self.dir.join("data/pki/authorities/local/root.crt")
    }

    /// caddy's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("caddy.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "caddy exited with {status}: {}",
                    self.log()
                )));
            }
            let tcp = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok();
            // caddy issues its leaf certificate after it starts listening; wait for it too.
            let leaf = self
                .dir
                .join("data/certificates/local/127.0.0.1/127.0.0.1.crt");
            if tcp && udp_port_bound(self.port) && self.root_ca_path().is_file() && leaf.is_file() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "caddy did not listen within {START_TIMEOUT:?}: {}",
                self.log()
            ),
        ))
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The Caddyfile: one https site on 127.0.0.1:PORT with caddy's internal CA, h1+h2+h3.
fn caddyfile(dir: &Path, port: u16) -> String {
    format!(
        r#"{{
	admin off
	storage file_system {{
		root {data}
	}}
	local_certs
	skip_install_trust
	auto_https disable_redirects
	servers {{
		protocols h1 h2 h3
	}}
}}
https://127.0.0.1:{port} {{
	bind 127.0.0.1
	tls internal
	respond /status/404 "not here" 404
	respond "{body}" 200
}}
"#,
        data = dir.join("data").display(),
        body = CADDY_BODY,
    )
}

/// Whether some socket is bound to UDP `port` on 127.0.0.1 or the wildcard (from /proc/net/udp).
pub fn udp_port_bound(port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/udp") else {
        return true; // Not Linux: fall back to the TCP check alone.
    };
    let wanted = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1))
        .any(|local| local.ends_with(&wanted))
}

/// A port free on 127.0.0.1 for both TCP and UDP at the time of the call.
pub fn free_tcp_and_udp_port() -> io::Result<u16> {
    for _ in 0..100 {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = udp.local_addr()?.port();
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no port free for both TCP and UDP",
    ))
}

/// A new empty directory under the system temp dir, unique to this process and call.
pub fn unique_temp_dir(prefix: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "httpvs-{prefix}-{}-{n}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
