//! The relay shell: one thread per direction reads packets from a TUN device, runs them through
//! the netem core and writes them to the other TUN device at their due times, on a fine clock.

mod shared;

use crate::core::NetemCore;
use crate::counters::{DirectionCounters, LinkCounters};
use crate::sys::check;
use crate::sys::tun::Tun;
use shared::SharedCounters;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A packet sent later than this after its due time counts as late (the relay fell behind).
const LATE_AFTER: Duration = Duration::from_millis(1);
/// Real-time priority of the relay threads when allowed: a busy machine must not hold packets back.
const RELAY_PRIORITY: libc::c_int = 10;
/// Packets read in one go before sending what is due.
const READ_BATCH: usize = 64;
/// Spare packet buffers kept for reuse.
const POOL_MAX: usize = 2048;

/// Sees every packet the client sends, before the netem core takes it (the rootless
/// forwarder binds a listener for a new destination there, before its first packet arrives).
pub trait PacketWatch: Send + Sync {
    /// Called on the up direction's thread for each packet read from the client's device.
    fn client_packet(&self, packet: &[u8]);
}

/// Both directions of a running relay; dropping it stops and joins the threads.
#[derive(Debug)]
pub struct Relay {
    stop: Arc<OwnedFd>,
    threads: Vec<JoinHandle<()>>,
    up: Arc<SharedCounters>,
    down: Arc<SharedCounters>,
}

impl Relay {
    /// Starts relaying: `client` to `server` through `up`, and back through `down`.
    pub fn start(
        client: Arc<Tun>,
        server: Arc<Tun>,
        up: NetemCore,
        down: NetemCore,
        mtu: u32,
        watch: Option<Arc<dyn PacketWatch>>,
    ) -> io::Result<Relay> {
        // SAFETY: eventfd returns a fresh fd, owned below.
        let raw = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: fresh fd that nothing else owns.
        let stop = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let epoch = Instant::now();
        let mut relay = Relay {
            stop,
            threads: Vec::new(),
            up: Arc::default(),
            down: Arc::default(),
        };
        let directions = [
            (
                "netem-up",
                client.clone(),
                server.clone(),
                up,
                relay.up.clone(),
                watch,
            ),
            ("netem-down", server, client, down, relay.down.clone(), None),
        ];
        for (name, input, output, core, shared, watch) in directions {
            let direction = Direction {
                input,
                output,
                stop: relay.stop.clone(),
                core,
                shared,
                watch,
                epoch,
                scratch: vec![0; mtu as usize + 128],
                pool: Vec::new(),
                late: 0,
                rejected: 0,
            };
            let handle = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || direction.run())?;
            relay.threads.push(handle);
        }
        Ok(relay)
    }

    /// Counters of both directions so far.
    pub fn counters(&self) -> LinkCounters {
        LinkCounters {
            up: self.up.load(),
            down: self.down.load(),
        }
    }

    /// A direction whose relay stopped on its own, and why (`up: TUN device closed`).
    pub fn failure(&self) -> Option<String> {
        let up = self.up.failure().map(|e| format!("up: {e}"));
        up.or_else(|| self.down.failure().map(|e| format!("down: {e}")))
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd wakes both threads.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One direction's thread state.
struct Direction {
    input: Arc<Tun>,
    output: Arc<Tun>,
    stop: Arc<OwnedFd>,
    core: NetemCore,
    shared: Arc<SharedCounters>,
    watch: Option<Arc<dyn PacketWatch>>,
    epoch: Instant,
    scratch: Vec<u8>,
    pool: Vec<Vec<u8>>,
    late: u64,
    rejected: u64,
}

impl Direction {
    fn run(mut self) {
        // SAFETY: prctl on the calling thread; a 1 ns slack makes sub-ms sleeps wake on time.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        let param = libc::sched_param {
            sched_priority: RELAY_PRIORITY,
        };
        // SAFETY: sets this thread's policy; failure (no privilege) just keeps the normal policy.
        // The thread never spins, so it cannot starve the machine; the kernel's RT throttle bounds it too.
        unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        loop {
            self.send_due(self.now());
            self.publish();
            let wait = self
                .core
                .poll_timeout()
                .map(|due| due.saturating_sub(self.now()));
            if wait.is_some_and(|w| w.is_zero()) {
                continue;
            }
            match wait_readable(self.input.raw_fd(), self.stop.as_raw_fd(), wait) {
                Ok(Readiness::Stop) => return,
                Ok(Readiness::Input) => self.read_batch(),
                Ok(Readiness::Timeout) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Said, not silent: the link carries nothing this way from here on.
                    self.publish();
                    self.shared.fail(e.to_string());
                    return;
                }
            }
        }
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn read_batch(&mut self) {
        for _ in 0..READ_BATCH {
            // SAFETY: reading into `scratch`, which holds `scratch.len()` initialized bytes.
            let n = unsafe {
                libc::read(
                    self.input.raw_fd(),
                    self.scratch.as_mut_ptr().cast(),
                    self.scratch.len(),
                )
            };
            if n <= 0 {
                return;
            }
            if let Some(watch) = &self.watch {
                watch.client_packet(&self.scratch[..n as usize]);
            }
            // A right-sized copy: held packets cost their size, not the MTU (which may be 64 KB).
            let mut packet = self.pool.pop().unwrap_or_default();
            packet.clear();
            packet.extend_from_slice(&self.scratch[..n as usize]);
            let now = self.now();
            self.core.enqueue(now, packet);
        }
    }

    fn send_due(&mut self, now: Duration) {
        while let Some(t) = self.core.poll_transmit(now) {
            if now.saturating_sub(t.due) > LATE_AFTER {
                self.late += 1;
            }
            // SAFETY: writing the packet's initialized bytes.
            let n = unsafe {
                libc::write(
                    self.output.raw_fd(),
                    t.packet.as_ptr().cast(),
                    t.packet.len(),
                )
            };
            // A refused write is a drop, as on a wire, counted as sent and `rejected`: a
            // corrupted IP header (EINVAL) or, rarely, a full kernel queue behind the device.
            if n < 0 {
                self.rejected += 1;
            }
            self.recycle(t.packet);
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    fn publish(&self) {
        let counters = DirectionCounters {
            late: self.late,
            rejected: self.rejected,
            ..self.core.counters()
        };
        self.shared.store(&counters);
    }
}

enum Readiness {
    Input,
    Stop,
    Timeout,
}

/// Waits until `input` or `stop` is readable or `timeout` passes (None: no limit), to the nanosecond.
fn wait_readable(input: RawFd, stop: RawFd, timeout: Option<Duration>) -> io::Result<Readiness> {
    let mut fds = [
        libc::pollfd {
            fd: input,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: two valid pollfds, an optional timespec that outlives the call, no signal mask.
    check(unsafe { libc::ppoll(fds.as_mut_ptr(), 2, ts_ptr, std::ptr::null()) })?;
    if fds[1].revents != 0 {
        Ok(Readiness::Stop)
    } else if fds[0].revents & libc::POLLIN != 0 {
        Ok(Readiness::Input)
    } else if fds[0].revents != 0 {
        Err(io::Error::other("TUN device closed"))
    } else {
        Ok(Readiness::Timeout)
    }
}
