//! The I/O task of an owned HTTP/2 connection: writes what the core queued (everything the
//! streams queued in one loop turn leaves in one write) and feeds it the frames it reads.
//!
//! Reads land in one buffer per thread, not per connection: only the bytes of a frame cut off
//! by the end of a read stay with the connection, so an idle connection holds almost nothing.

use super::conn_core::{ConnCore, ConnError, MAX_FRAME};
use super::frame_tap::FrameHeader;
use super::frame_write::code;
use crate::error::ErrorKind;
use crate::protocol::tcp::{io_error_kind, Transport};
use crate::protocol::CloseCause;
use std::cell::RefCell;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Room kept in front of each read for a partial frame carried over from the last one.
const CARRY_ROOM: usize = MAX_FRAME + 9;
/// Bytes asked of the socket per read.
const READ_LEN: usize = 64 * 1024;
/// Loop turns one poll may take before letting other tasks run.
const BUDGET: usize = 16;
/// A write buffer grown past this (large bodies) is given back after use.
const KEEP_WRITE_CAPACITY: usize = 64 * 1024;

thread_local! {
    static READ_BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; CARRY_ROOM + READ_LEN]);
}

/// Locks the core; a poisoned lock (a panic elsewhere) still holds consistent state.
pub fn lock(core: &Mutex<ConnCore>) -> MutexGuard<'_, ConnCore> {
    core.lock().unwrap_or_else(|p| p.into_inner())
}

struct Driver {
    io: Transport,
    core: Arc<Mutex<ConnCore>>,
    /// The start of a frame the last read cut off.
    carry: Vec<u8>,
    writing: Vec<u8>,
    written: usize,
    flush_owed: bool,
}

/// Runs the connection's I/O until it ends.
pub async fn drive(io: Transport, core: Arc<Mutex<ConnCore>>) {
    let mut driver = Driver {
        io,
        core,
        carry: Vec::new(),
        writing: Vec::with_capacity(1024),
        written: 0,
        flush_owed: false,
    };
    poll_fn(|cx| driver.poll(cx)).await;
}

impl Driver {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Registered before looking at the queue, so a request queued later wakes us.
        lock(&self.core).set_driver_waker(cx.waker());
        for _ in 0..BUDGET {
            let wrote = match self.poll_write(cx) {
                Ok(progress) => progress,
                Err(kind) => return self.stop(io_cause(kind), Some(kind)),
            };
            if lock(&self.core).ended() {
                // Whatever was queued last (a GOAWAY) had its chance; the socket closes now.
                return Poll::Ready(());
            }
            let read = match self.poll_read(cx) {
                Ok(progress) => progress,
                Err(None) => return self.stop(CloseCause::Fin, None),
                Err(Some(kind)) => return self.stop(io_cause(kind), Some(kind)),
            };
            if !wrote && !read {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn stop(&mut self, cause: CloseCause, error: Option<ErrorKind>) -> Poll<()> {
        lock(&self.core).end(cause, error);
        Poll::Ready(())
    }

    /// Writes queued frames; `Ok(true)` if any bytes left.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<bool, ErrorKind> {
        let mut progress = false;
        loop {
            if self.written == self.writing.len() {
                self.writing.clear();
                self.written = 0;
                if self.writing.capacity() > KEEP_WRITE_CAPACITY {
                    self.writing = Vec::with_capacity(1024);
                }
                lock(&self.core).take_out(&mut self.writing);
                if self.writing.is_empty() {
                    return self.poll_flush(cx).map(|()| progress);
                }
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.writing[self.written..]) {
                Poll::Ready(Ok(0)) => return Err(ErrorKind::ConnectionClosed),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.flush_owed = true;
                    progress = true;
                }
                Poll::Ready(Err(e)) => return Err(io_error_kind(&e)),
                Poll::Pending => return Ok(progress),
            }
        }
    }

    /// TLS may hold written records until flushed.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorKind> {
        if !self.flush_owed {
            return Ok(());
        }
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Ok(())) => {
                self.flush_owed = false;
                Ok(())
            }
            Poll::Ready(Err(e)) => Err(io_error_kind(&e)),
            Poll::Pending => Ok(()),
        }
    }

    /// Reads once and hands every whole frame to the core. `Ok(true)` if bytes arrived;
    /// `Err(None)` at EOF, `Err(Some(kind))` on an I/O error.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Result<bool, Option<ErrorKind>> {
        READ_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            let mut read_buf = ReadBuf::new(&mut buf[CARRY_ROOM..]);
            match Pin::new(&mut self.io).poll_read(cx, &mut read_buf) {
                Poll::Pending => Ok(false),
                Poll::Ready(Err(e)) => Err(Some(io_error_kind(&e))),
                Poll::Ready(Ok(())) => {
                    let n = read_buf.filled().len();
                    if n == 0 {
                        return Err(None);
                    }
                    let start = CARRY_ROOM - self.carry.len();
                    buf[start..CARRY_ROOM].copy_from_slice(&self.carry);
                    self.carry.clear();
                    let end = CARRY_ROOM + n;
                    let used = self.on_bytes(&buf[start..end]);
                    self.carry.extend_from_slice(&buf[start + used..end]);
                    Ok(true)
                }
            }
        })
    }

    /// Hands the whole frames in `bytes` to the core; returns the bytes they took.
    fn on_bytes(&self, bytes: &[u8]) -> usize {
        let now = Instant::now();
        let mut core = lock(&self.core);
        let mut pos = 0;
        while bytes.len() - pos >= 9 {
            let mut head = [0u8; 9];
            head.copy_from_slice(&bytes[pos..pos + 9]);
            let header = FrameHeader::parse(&head);
            let len = header.length as usize;
            if len > MAX_FRAME {
                core.fail_on(&header, ConnError(code::FRAME_SIZE_ERROR));
                return bytes.len();
            }
            let end = pos + 9 + len;
            if end > bytes.len() {
                break;
            }
            if let Err(error) = core.on_frame(&header, &bytes[pos + 9..end], now) {
                core.fail_on(&header, error);
                return bytes.len();
            }
            pos = end;
        }
        pos
    }
}

fn io_cause(kind: ErrorKind) -> CloseCause {
    match kind {
        ErrorKind::ConnectionClosed => CloseCause::Fin,
        _ => CloseCause::Reset,
    }
}
