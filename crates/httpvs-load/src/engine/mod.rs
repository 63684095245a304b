//! The engine: runs a schedule over a protocol on worker threads and gathers the statistics.
//!
//! Thread-per-core: each worker is a std thread with a current-thread tokio runtime and a
//! `LocalSet`; it owns its connections (slots), its streams and its statistics. The calling
//! thread only merges once-a-second intervals for the observer, then the totals for the report.

pub mod builtin;
mod context;
mod coordinator;
pub mod factory;
mod lone_set;
mod pacer;
mod pin;
mod request_timer;
pub mod setup;
mod slot;
pub mod stop_bell;
mod stream;
mod worker;

pub use factory::ProtocolFactory;
pub use setup::{connect_timeout_line, LoadError};

use crate::config::{LoadConfig, StopAfter};
use crate::protocol::{ConnectInfo, ConnectOptions, Connection, Protocol, ProtocolKind, Target};
use crate::report::build::{build_report, RunFacts};
use crate::report::Report;
use crate::schedule::{RunPlan, WorkerSchedule};
use crate::stats::{Observer, WorkerStats};
use context::RunShared;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use worker::{run_worker, WorkerJob, WorkerResult, WorkerStart};

/// Time between the workers' set-up and the first request, so every worker starts on the same
/// clock.
const START_DELAY: Duration = Duration::from_millis(20);

/// Runs a load with a given protocol factory; `crate::run` picks the factory from the config.
/// `stop`, when set, ends the run early (the report covers what ran; requests in flight are cut off).
pub fn run_with_protocol<F: ProtocolFactory>(
    config: &LoadConfig,
    target: &Target,
    factory: F,
    tls: Option<Arc<rustls::ClientConfig>>,
    observer: &mut dyn Observer,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    config.validate()?;
    let target = target.clone();
    let mut options = ConnectOptions {
        connect_timeout: config.connect_timeout,
        tls,
        streams: config.streams,
        keepalive: config.keepalive,
    };
    let factory = Arc::new(factory);
    let first = probe(&*factory, &target, &options, &stop)?;
    if first.server_max_streams == Some(0) {
        // Every request would wait for a stream that never comes, then time out.
        return Err(LoadError::NoStreams { addr: target.addr });
    }
    let streams = first
        .server_max_streams
        .map_or(config.streams, |limit| config.streams.min(limit.max(1)));
    options.streams = streams;
    let requests = match config.stop {
        StopAfter::Requests(n) => Some(n),
        StopAfter::Duration(_) => None,
    };
    // An open -n run below -c x -m opens only the connections its requests can fill: it opens
    // them before its clock, and `-n 3 -c 5` opened five, two never used (the closed model
    // opens a connection at its first request, so never opens those).
    let connections = match (config.is_open_model(), requests) {
        (true, Some(n)) => {
            let needed = n.div_ceil(u64::from(streams.max(1))).max(1);
            config
                .connections
                .min(u32::try_from(needed).unwrap_or(u32::MAX))
        }
        _ => config.connections,
    };
    let workers = config.worker_count().min(connections as usize);
    let plan = RunPlan::new(
        connections,
        workers,
        requests.filter(|_| !config.is_open_model()),
    );
    // The open model opens its connections before its clock starts, as wrk2 does: a send due
    // at its intended time then finds a connection, and no handshake lands in the corrected
    // latency. The closed model's first request on a slot opens it, as h2load's do, unless
    // the config asks for the open model's way (compare does, for lossy links).
    let preconnect = (config.is_open_model() || config.preconnect) && config.keepalive;
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut handles = Vec::with_capacity(workers);
    let mut starts = Vec::with_capacity(workers);
    for index in 0..workers {
        let job = WorkerJob {
            target: target.clone(),
            connections: plan.connections[index],
            streams,
            preconnect: preconnect.then(|| options.clone()),
            cpu: config.cpus.as_ref().map(|c| c[index % c.len()]),
            stop: stop.clone(),
        };
        let (start_tx, start_rx) = tokio::sync::oneshot::channel();
        starts.push(start_tx);
        let (factory, tx, ready) = (factory.clone(), tx.clone(), ready_tx.clone());
        let handle = std::thread::Builder::new()
            .name(format!("httpvs-load-{index}"))
            .spawn(move || run_worker(job, factory, (ready, start_rx), tx))
            .map_err(|e| LoadError::Worker(e.to_string()))?;
        handles.push(handle);
    }
    drop((tx, ready_tx));
    // Every worker has its runtime (and, in the open model, its connections): the clock starts.
    // A worker that failed to set up drops its sender unsent: the run does not start, and its
    // error is the run's. (The others used to run it whole, and its report was lost with that
    // error at the end.)
    let mut ready = 0;
    while ready < workers && ready_rx.recv().is_ok() {
        ready += 1;
    }
    if ready < workers {
        drop(starts);
        return Err(setup_failure(handles));
    }
    let origin = Instant::now() + START_DELAY;
    let measure_start = origin + config.warmup;
    let deadline = match config.stop {
        StopAfter::Duration(d) => Some(measure_start + d),
        StopAfter::Requests(_) => None,
    };
    let shared = Arc::new(RunShared {
        target: target.clone(),
        specs: setup::request_specs(config).into(),
        options,
        origin,
        measure_start,
        deadline,
        timeout: config.timeout,
        // The open model's schedule paces attempts itself: a due send that cannot connect
        // fails at once (an error, as Fortio and wrk2 count it) rather than waiting in backoff.
        backoff_on_connect_failure: deadline.is_some() && config.rate.is_none(),
        stop,
        request_log: config.request_log.clone(),
        connections_numbered: AtomicU64::new(0),
    });
    for (index, start) in starts.into_iter().enumerate() {
        let schedule = match config.rate {
            Some(rate) => WorkerSchedule::open(
                origin,
                measure_start,
                rate,
                (plan.lanes(index), u64::from(connections)),
                requests,
                deadline,
            ),
            None => WorkerSchedule::closed(
                measure_start,
                plan.requests.as_ref().map(|r| r[index]),
                deadline,
            ),
        };
        // A worker that is gone has its error waiting in its join handle.
        let _ = start.send(WorkerStart {
            shared: shared.clone(),
            schedule,
        });
    }
    let mut series =
        coordinator::coordinate(rx, workers, (origin, measure_start, deadline), observer);
    let (stats, finished_at) = join_workers(handles)?;
    let interrupted = shared.stop.load(std::sync::atomic::Ordering::Relaxed);
    let duration = measured_span(
        config,
        finished_at.saturating_duration_since(measure_start),
        interrupted,
    );
    coordinator::end_series_at(&mut series, duration.as_secs_f64());
    let facts = RunFacts {
        config,
        kind: factory.kind(),
        alpn: first.alpn.map(Vec::from),
        target: &target,
        streams,
        threads: workers,
        duration,
        interrupted,
        series,
        // `probe` above; the caller adds any it opened to choose the protocol.
        probes: 1,
    };
    Ok(build_report(facts, &stats))
}

/// The measured part's length, what rates are divided by. The open model's schedule spans the
/// whole `-z` (or `-n / --rate`) even when its last send is long before the end: `--rate 2
/// -z 2s` sends its last request at 1.5 s, and dividing by 1.5 s would report 2.7 req/s. An
/// interrupted run spans what it ran.
fn measured_span(config: &LoadConfig, ran: Duration, interrupted: bool) -> Duration {
    let scheduled = match (config.rate, config.stop) {
        (Some(_), StopAfter::Duration(d)) => Some(d),
        (Some(rate), StopAfter::Requests(n)) => Duration::try_from_secs_f64(n as f64 / rate).ok(),
        (None, _) => None,
    };
    let span = match scheduled {
        Some(s) if !interrupted => ran.max(s),
        _ => ran,
    };
    match config.stop {
        StopAfter::Duration(d) => span.min(d),
        StopAfter::Requests(_) => span,
    }
}

/// Opens and closes one connection before the run: a target that refuses, does not answer
/// or fails TLS is a setup error with a clear line, not a run full of failures. It also learns
/// the server's stream limit and ALPN choice.
fn probe<F: ProtocolFactory>(
    factory: &F,
    target: &Target,
    options: &ConnectOptions,
    stop: &AtomicBool,
) -> Result<ConnectInfo, LoadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadError::Worker(e.to_string()))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let protocol = factory.make(target)?;
        let attempt =
            tokio::time::timeout(options.connect_timeout, protocol.connect(target, options));
        let result = tokio::select! {
            result = attempt => result.unwrap_or(Err(crate::error::ErrorKind::ConnectTimeout)),
            () = stop_requested(stop) => return Err(LoadError::Interrupted),
        };
        match result {
            Ok((conn, mut info)) => {
                if info.server_max_streams.is_none() && options.streams > 1 {
                    info.server_max_streams = conn.stream_limit(options.streams);
                }
                conn.close();
                drop(conn);
                // Let the close reach the socket before the runtime goes.
                tokio::task::yield_now().await;
                Ok(info)
            }
            Err(crate::error::ErrorKind::Refused) if factory.kind() == ProtocolKind::H3 => {
                Err(LoadError::RefusedUdp { addr: target.addr })
            }
            Err(kind) => {
                Err(
                    LoadError::first_connection(target.addr, kind, options.connect_timeout)
                        .with_detail(protocol.failure_detail()),
                )
            }
        }
    })
}

/// Completes once `stop` is set (Ctrl-C), looked at every 50 ms: for the waits before a run
/// starts, which the workers' own watch does not cover.
pub(crate) async fn stop_requested(stop: &AtomicBool) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The error of the worker whose set-up failed, the others (told the run will not start)
/// joined too.
fn setup_failure(
    handles: Vec<std::thread::JoinHandle<Result<WorkerResult, LoadError>>>,
) -> LoadError {
    match join_workers(handles) {
        Err(e) => e,
        Ok(_) => LoadError::Worker(worker::NOT_STARTED.into()),
    }
}

/// The workers' stats merged, and when the last one finished; or the first error, a real
/// one before a worker's "the run did not start".
fn join_workers(
    handles: Vec<std::thread::JoinHandle<Result<WorkerResult, LoadError>>>,
) -> Result<(WorkerStats, Instant), LoadError> {
    let mut total = WorkerStats::default();
    let mut last = None::<Instant>;
    let (mut first_error, mut not_started) = (None, None);
    for handle in handles {
        match handle.join() {
            Ok(Ok(result)) => {
                total.merge(&result.stats);
                last = Some(last.map_or(result.finished_at, |l| l.max(result.finished_at)));
            }
            Ok(Err(LoadError::Worker(why))) if why == worker::NOT_STARTED => {
                not_started.get_or_insert(LoadError::Worker(why));
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(LoadError::Worker("a worker thread panicked".into()));
            }
        }
    }
    match first_error.or(not_started) {
        Some(e) => Err(e),
        None => Ok((total, last.unwrap_or_else(Instant::now))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LoadConfig {
        LoadConfig::new("http://127.0.0.1:1/").unwrap()
    }

    #[test]
    fn the_open_models_span_is_its_schedules() {
        let ms = Duration::from_millis;
        // --rate 2 -z 2s: the last send is at 1.5 s, the span is still 2 s.
        let open_z = config().rate(2.0).duration(ms(2000));
        assert_eq!(measured_span(&open_z, ms(1500), false), ms(2000));
        // Interrupted at 0.7 s: what ran.
        assert_eq!(measured_span(&open_z, ms(700), true), ms(700));
        // --rate 5 -n 5: 1 s of schedule, more if the last response came later.
        let open_n = config().rate(5.0).requests(5);
        assert_eq!(measured_span(&open_n, ms(800), false), ms(1000));
        assert_eq!(measured_span(&open_n, ms(1300), false), ms(1300));
        // The closed model spans what ran, -z at most.
        let closed = config().duration(ms(2000));
        assert_eq!(measured_span(&closed, ms(2030), false), ms(2000));
        assert_eq!(measured_span(&config().requests(9), ms(30), false), ms(30));
    }
}
