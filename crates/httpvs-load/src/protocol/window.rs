//! Receive flow-control windows (`--window`, `--connection-window`, as h2load's `-w`/`-W`):
//! what HTTP/2 advertises (SETTINGS_INITIAL_WINDOW_SIZE and the first connection
//! WINDOW_UPDATE) and what HTTP/3 hands quinn (`stream_receive_window`, `receive_window`).
//! HTTP/1.1 has no window of its own (TCP's is the kernel's).
//!
//! A small window on a long round trip caps a stream at one window per round trip: the classic
//! reason one HTTP/2 connection loses to several HTTP/1.1 connections on large responses.

use crate::config::ProtocolChoice;
use crate::protocol::ProtocolKind;

/// The largest window HTTP/2 can advertise (2^31-1, RFC 9113 §6.9.1); the flags take no more
/// on HTTP/3 either, so one value means the same on both.
pub const MAX_WINDOW: u64 = (1 << 31) - 1;

/// HTTP/2's default for both windows: h2load's (`-w 30`, `-W 30`), so the client never
/// throttles the server.
pub const H2_DEFAULT_WINDOW: u32 = (1 << 30) - 1;

/// HTTP/2's connection window before any WINDOW_UPDATE (RFC 9113 §6.9.2): WINDOW_UPDATE can
/// only raise it, and SETTINGS_INITIAL_WINDOW_SIZE applies to streams only, so a client cannot
/// advertise less.
pub const H2_INITIAL_CONNECTION_WINDOW: u64 = 65_535;

/// quinn's default stream receive window (`TransportConfig::default()`: 12.5 MB/s over an
/// expected 100 ms round trip), which HTTP/3 keeps without `--window`. Its default
/// connection window is unlimited.
pub const H3_DEFAULT_STREAM_WINDOW: u64 = 1_250_000;

/// The receive windows a run asked for; `None` keeps the protocol's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiveWindows {
    /// `--window`: bytes the server may send on one stream before we acknowledge them.
    pub stream: Option<u64>,
    /// `--connection-window`: bytes the server may send on one connection, over all its
    /// streams, before we acknowledge them.
    pub connection: Option<u64>,
}

/// The windows one HTTP/2 connection advertises, in bytes (1 to 2^31-1 each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Windows {
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub stream: u32,
    /// The connection window after our first WINDOW_UPDATE.
    pub connection: u32,
}

impl Default for H2Windows {
    fn default() -> Self {
        H2Windows {
            stream: H2_DEFAULT_WINDOW,
            connection: H2_DEFAULT_WINDOW,
        }
    }
}

impl H2Windows {
    /// Unacknowledged stream bytes that send a stream WINDOW_UPDATE: half the window, so the
    /// server always has the other half to send while the update travels (a small window would
    /// otherwise stall each round trip), and at least one byte (an increment of 0 is an error).
    pub fn stream_refill_at(&self) -> u32 {
        (self.stream / 2).max(1)
    }

    /// Unacknowledged connection bytes that send a connection WINDOW_UPDATE (as for streams).
    pub fn connection_refill_at(&self) -> u32 {
        (self.connection / 2).max(1)
    }
}

impl ReceiveWindows {
    /// Whether neither window was set.
    pub fn is_default(&self) -> bool {
        self.stream.is_none() && self.connection.is_none()
    }

    /// The windows HTTP/2 advertises: those asked for, else h2load's default.
    pub fn h2(&self) -> H2Windows {
        let pick =
            |asked: Option<u64>| asked.map_or(H2_DEFAULT_WINDOW, |w| w.clamp(1, MAX_WINDOW) as u32);
        H2Windows {
            stream: pick(self.stream),
            connection: pick(self.connection),
        }
    }

    /// The stream window HTTP/3 runs with: the one asked for, else quinn's default.
    pub fn h3_stream(&self) -> u64 {
        self.stream.unwrap_or(H3_DEFAULT_STREAM_WINDOW)
    }

    /// The windows a connection of `kind` advertises: per stream, and per connection (`None`:
    /// no limit, h3's default); `None` on HTTP/1.1, which has none.
    pub fn advertised(&self, kind: ProtocolKind) -> Option<(u64, Option<u64>)> {
        match kind {
            ProtocolKind::H1 => None,
            ProtocolKind::H2 | ProtocolKind::H2c => {
                let h2 = self.h2();
                Some((u64::from(h2.stream), Some(u64::from(h2.connection))))
            }
            ProtocolKind::H3 => Some((self.h3_stream(), self.connection)),
        }
    }

    /// Sets the windows asked for on quinn's transport config; the others stay quinn's.
    pub fn apply_to_quic(&self, transport: &mut quinn::TransportConfig) {
        let varint = |w: u64| quinn::VarInt::from_u32(w.clamp(1, MAX_WINDOW) as u32);
        if let Some(w) = self.stream {
            transport.stream_receive_window(varint(w));
        }
        if let Some(w) = self.connection {
            transport.receive_window(varint(w));
        }
    }

    /// Checks the windows against their range and the protocol the run may speak; the error
    /// is one line naming the flag.
    pub fn check(&self, protocol: ProtocolChoice, https: bool) -> Result<(), String> {
        let given = [
            ("--window", self.stream),
            ("--connection-window", self.connection),
        ];
        for (flag, window) in given {
            match window {
                Some(w) if !(1..=MAX_WINDOW).contains(&w) => {
                    return Err(format!(
                        "{flag} {w}: a receive window is 1 to {MAX_WINDOW} bytes (2g - 1, the \
                         most HTTP/2 can advertise)"
                    ))
                }
                _ => {}
            }
        }
        let Some((flag, _)) = given.iter().find(|(_, w)| w.is_some()) else {
            return Ok(());
        };
        match protocol {
            ProtocolChoice::Fixed(ProtocolKind::H1) => {
                return Err(format!(
                    "{flag} needs -p h2c, h2 or h3: HTTP/1.1 has no flow-control window of its own"
                ))
            }
            ProtocolChoice::Auto if !https => {
                return Err(format!(
                    "{flag} needs -p h2c (or h2, h3 on https): -p auto on an http:// URL is \
                     HTTP/1.1, which has no flow-control window of its own"
                ))
            }
            _ => {}
        }
        let may_speak_h2 = !matches!(protocol, ProtocolChoice::Fixed(ProtocolKind::H3));
        match self.connection {
            Some(w) if may_speak_h2 && w < H2_INITIAL_CONNECTION_WINDOW => Err(format!(
                "--connection-window {w} is below 65535 bytes, where HTTP/2's connection window \
                 starts: a client can raise it but never lower it (use 65535 or more; 64k is \
                 65536)"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: ProtocolChoice = ProtocolChoice::Fixed(ProtocolKind::H1);
    const H2C: ProtocolChoice = ProtocolChoice::Fixed(ProtocolKind::H2c);
    const H3: ProtocolChoice = ProtocolChoice::Fixed(ProtocolKind::H3);

    fn windows(stream: Option<u64>, connection: Option<u64>) -> ReceiveWindows {
        ReceiveWindows { stream, connection }
    }

    #[test]
    fn defaults_are_h2loads_and_quinns() {
        let none = ReceiveWindows::default();
        assert!(none.is_default());
        assert_eq!(none.h2(), H2Windows::default());
        assert_eq!(none.h2().stream, (1 << 30) - 1);
        assert_eq!(none.h3_stream(), H3_DEFAULT_STREAM_WINDOW);
        assert!(none.check(H1, false).is_ok());
        // quinn's Debug shows its defaults; ours must be the same figure.
        let quinn = format!("{:?}", quinn::TransportConfig::default());
        assert!(
            quinn.contains(&format!(
                "stream_receive_window: {H3_DEFAULT_STREAM_WINDOW}"
            )),
            "{quinn}"
        );
    }

    #[test]
    fn windows_are_checked_against_range_and_protocol() {
        let small = windows(Some(16 << 10), None);
        assert_eq!(small.h2().stream, 16 << 10);
        assert_eq!(small.h2().connection, H2_DEFAULT_WINDOW);
        assert!(small.check(H2C, false).is_ok());
        assert!(small.check(ProtocolChoice::Auto, true).is_ok());
        let h1 = small.check(H1, false).unwrap_err();
        assert!(h1.starts_with("--window needs -p h2c"), "{h1}");
        let auto = small.check(ProtocolChoice::Auto, false).unwrap_err();
        assert!(auto.contains("-p auto on an http:// URL"), "{auto}");
        for bad in [0, MAX_WINDOW + 1, u64::MAX] {
            let e = windows(Some(bad), None).check(H2C, false).unwrap_err();
            assert!(e.starts_with(&format!("--window {bad}: ")), "{e}");
            let e = windows(None, Some(bad)).check(H3, true).unwrap_err();
            assert!(e.starts_with("--connection-window "), "{e}");
        }
        assert!(windows(Some(MAX_WINDOW), Some(MAX_WINDOW))
            .check(H2C, false)
            .is_ok());
    }

    #[test]
    fn an_h2_connection_window_below_its_start_is_refused_but_not_on_h3() {
        let tiny = windows(None, Some(16 << 10));
        let e = tiny.check(H2C, false).unwrap_err();
        assert!(e.contains("below 65535"), "{e}");
        assert!(tiny.check(ProtocolChoice::Auto, true).is_err());
        assert!(tiny.check(H3, true).is_ok());
        assert!(windows(None, Some(65_535)).check(H2C, false).is_ok());
    }

    #[test]
    fn refills_start_at_half_the_window_and_never_at_zero() {
        let w = H2Windows {
            stream: 16 << 10,
            connection: 1,
        };
        assert_eq!(w.stream_refill_at(), 8 << 10);
        assert_eq!(w.connection_refill_at(), 1);
    }

    #[test]
    fn quinn_gets_only_the_windows_asked_for() {
        let mut transport = quinn::TransportConfig::default();
        windows(Some(16 << 10), None).apply_to_quic(&mut transport);
        let shown = format!("{transport:?}");
        assert!(shown.contains("stream_receive_window: 16384"), "{shown}");
        assert!(
            shown.contains(&format!("receive_window: {}", quinn::VarInt::MAX)),
            "{shown}"
        );
    }
}
