//! Starting and stopping: binds every listener in the caller's thread, then runs one
//! current-thread runtime per worker thread (thread per core, no work stealing), each with its own
//! TCP listeners; worker 0 also runs the QUIC endpoint.

use crate::cert::ServerCert;
use crate::config::ServeConfig;
use crate::error::ServeError;
use crate::totals::{Counters, ServerTotals};
use crate::worker::WorkerCtx;
use crate::{date, h3, listen, tcp};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// A server running on its own threads; dropping it stops it without a grace period.
pub struct RunningServer {
    http: Option<SocketAddr>,
    https: Option<SocketAddr>,
    h3: Option<SocketAddr>,
    ca_pem: String,
    cert_der: Vec<u8>,
    fingerprint: String,
    counters: Vec<Arc<Counters>>,
    live: Arc<AtomicUsize>,
    stop: watch::Sender<Option<Instant>>,
    threads: Vec<JoinHandle<()>>,
}

/// What one worker thread serves.
struct WorkerPlan {
    runtime: Runtime,
    http: Option<std::net::TcpListener>,
    https: Option<std::net::TcpListener>,
    quic: Option<quinn::Endpoint>,
    cpu: Option<usize>,
    ctx: Arc<WorkerCtx>,
}

/// Binds the listeners and starts the workers; returns once the server accepts connections.
pub fn start(config: ServeConfig) -> Result<RunningServer, ServeError> {
    let threads = config.threads;
    if threads == 0 {
        return Err(ServeError::Config("threads must be at least 1".into()));
    }
    if threads > crate::config::MAX_THREADS {
        return Err(ServeError::Config(format!(
            "threads {threads} is more than {}",
            crate::config::MAX_THREADS
        )));
    }
    if config.http.is_none() && config.https.is_none() && config.h3.is_none() {
        return Err(ServeError::Config("every listener is off".into()));
    }
    let cert = match (&config.cert, &config.cert_pem) {
        (Some((cert, key)), Some(pem)) => ServerCert::from_pem(&pem.cert, &pem.key, cert, key)?,
        (Some((cert, key)), None) => ServerCert::from_pem_files(cert, key)?,
        (None, _) => ServerCert::self_signed()?,
    };
    let tls = match config.https {
        Some(_) => Some(TlsAcceptor::from(cert.tls_config()?)),
        None => None,
    };
    let mut http = bind_tcp(config.http, threads)?;
    let mut https = bind_tcp(config.https, threads)?;
    let udp = config.h3.map(listen::udp).transpose()?;
    let local = |l: &Option<Vec<std::net::TcpListener>>| {
        l.as_ref()
            .and_then(|v| v.first())
            .and_then(|s| s.local_addr().ok())
    };
    let (http_addr, https_addr) = (local(&http), local(&https));
    let h3_addr = udp.as_ref().and_then(|s| s.local_addr().ok());

    let (stop, stop_rx) = watch::channel(None);
    let live = Arc::new(AtomicUsize::new(0));
    let mut plans = Vec::with_capacity(threads);
    for i in 0..threads {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let counters = Arc::new(Counters::default());
        let ctx = WorkerCtx::new(
            config.limits.clone(),
            counters,
            live.clone(),
            stop_rx.clone(),
            config.h2_engine,
        );
        let quic = match (&udp, i) {
            (Some(socket), 0) => Some(quic_endpoint(&runtime, socket, &cert, &config)?),
            _ => None,
        };
        plans.push(WorkerPlan {
            runtime,
            http: http.as_mut().and_then(|v| v.pop()),
            https: https.as_mut().and_then(|v| v.pop()),
            quic,
            cpu: config
                .cpus
                .as_ref()
                .filter(|c| !c.is_empty())
                .map(|c| c[i % c.len()]),
            ctx: Arc::new(ctx),
        });
    }
    let counters = plans.iter().map(|p| p.ctx.counters.clone()).collect();
    let mut handles = Vec::with_capacity(threads);
    for (i, plan) in plans.into_iter().enumerate() {
        let tls = tls.clone();
        let handle = std::thread::Builder::new()
            .name(format!("httpvs-serve-{i}"))
            .spawn(move || run_worker(plan, tls))
            .map_err(ServeError::Runtime)?;
        handles.push(handle);
    }
    Ok(RunningServer {
        http: http_addr,
        https: https_addr,
        h3: h3_addr,
        ca_pem: cert.ca_pem().to_owned(),
        cert_der: cert.leaf_der().to_vec(),
        fingerprint: cert.fingerprint(),
        counters,
        live,
        stop,
        threads: handles,
    })
}

fn bind_tcp(
    addr: Option<SocketAddr>,
    threads: usize,
) -> Result<Option<Vec<std::net::TcpListener>>, ServeError> {
    addr.map(|a| listen::tcp(a, threads)).transpose()
}

fn quic_endpoint(
    runtime: &Runtime,
    socket: &std::net::UdpSocket,
    cert: &ServerCert,
    config: &ServeConfig,
) -> Result<quinn::Endpoint, ServeError> {
    let mut server = cert.quic_config()?;
    server.transport_config(Arc::new(h3::transport(&config.limits)));
    let socket = socket.try_clone().map_err(ServeError::Runtime)?;
    let _guard = runtime.enter();
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(ServeError::Runtime)
}

fn run_worker(plan: WorkerPlan, tls: Option<TlsAcceptor>) {
    if let Some(cpu) = plan.cpu {
        pin_to_cpu(cpu);
    }
    let WorkerPlan {
        runtime,
        http,
        https,
        quic,
        ctx,
        ..
    } = plan;
    runtime.block_on(async move {
        tokio::spawn(date::keep_current());
        if let Some(l) = http.and_then(|l| tokio::net::TcpListener::from_std(l).ok()) {
            tokio::spawn(tcp::accept_loop(l, None, ctx.clone()));
        }
        if let Some(l) = https.and_then(|l| tokio::net::TcpListener::from_std(l).ok()) {
            tokio::spawn(tcp::accept_loop(l, tls, ctx.clone()));
        }
        let endpoint = quic.inspect(|endpoint| {
            tokio::spawn(h3::accept_loop(endpoint.clone(), ctx.clone()));
        });
        let mut stop = ctx.shutdown.clone();
        let deadline = match stop.wait_for(|s| s.is_some()).await {
            Ok(deadline) => deadline.unwrap_or_else(Instant::now),
            Err(_) => Instant::now(),
        };
        // In-flight requests finish until the deadline; what is left then is cut off.
        while ctx.live_here.load(Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Some(endpoint) = endpoint {
            // QUIC has no FIN or RST: without a CONNECTION_CLOSE the clients still connected
            // would wait out their idle timeout. H3_NO_ERROR, as after a GOAWAY.
            endpoint.close(quinn::VarInt::from_u32(0x100), b"server stopped");
            let _ = tokio::time::timeout(Duration::from_millis(100), endpoint.wait_idle()).await;
        }
    });
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0, ...) affects only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl RunningServer {
    /// The cleartext TCP address (HTTP/1.1 and h2c).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http
    }

    /// The TLS address (h2 and http/1.1).
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https
    }

    /// The UDP address (HTTP/3).
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.h3
    }

    /// The PEM certificate clients should trust.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The DER of the server certificate.
    pub fn cert_der(&self) -> Vec<u8> {
        self.cert_der.clone()
    }

    /// SHA-256 of the certificate DER, lower-case hex.
    pub fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    /// Totals so far.
    pub fn totals(&self) -> ServerTotals {
        ServerTotals::sum(self.counters.iter().map(|c| c.as_ref()))
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.live.load(Relaxed)
    }

    /// Stops accepting, lets in-flight requests finish for at most `grace`, and returns the totals.
    pub fn shutdown(mut self, grace: Duration) -> ServerTotals {
        self.stop_and_join(grace);
        self.totals()
    }

    fn stop_and_join(&mut self, grace: Duration) {
        let _ = self.stop.send(Some(Instant::now() + grace));
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop_and_join(Duration::ZERO);
    }
}
