//! The protocols compare sets side by side: h1 keep-alive, h1 with a connection per request, h1 over TLS, h2c, h2, h3.

use httpvs_load::protocol::ProtocolKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One row of a comparison table: a wire protocol plus how connections are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Variant {
    /// HTTP/1.1 over cleartext TCP, keep-alive (the default baseline).
    H1,
    /// HTTP/1.1 over cleartext TCP, a new connection for every request.
    H1Close,
    /// HTTP/1.1 over TLS (ALPN http/1.1), keep-alive.
    H1Tls,
    /// HTTP/2 over cleartext TCP, prior knowledge.
    H2c,
    /// HTTP/2 over TLS (ALPN h2).
    H2,
    /// HTTP/3 over QUIC.
    H3,
}

/// Which listener of a server a variant needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Cleartext TCP (h1 and h2c).
    Http,
    /// TLS over TCP (h1 and h2 by ALPN).
    Https,
    /// QUIC over UDP.
    H3,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 6] = [
        Variant::H1,
        Variant::H1Close,
        Variant::H1Tls,
        Variant::H2c,
        Variant::H2,
        Variant::H3,
    ];

    /// The name used in plans, flags and tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::H1 => "h1",
            Variant::H1Close => "h1-close",
            Variant::H1Tls => "h1-tls",
            Variant::H2c => "h2c",
            Variant::H2 => "h2",
            Variant::H3 => "h3",
        }
    }

    /// What the name means, for `--help` and the HTML legend.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::H1 => "HTTP/1.1, keep-alive",
            Variant::H1Close => "HTTP/1.1, new connection per request",
            Variant::H1Tls => "HTTP/1.1 over TLS, keep-alive",
            Variant::H2c => "HTTP/2 cleartext (prior knowledge)",
            Variant::H2 => "HTTP/2 over TLS",
            Variant::H3 => "HTTP/3 over QUIC",
        }
    }

    /// The wire protocol the load generator speaks.
    pub fn kind(self) -> ProtocolKind {
        match self {
            Variant::H1 | Variant::H1Close | Variant::H1Tls => ProtocolKind::H1,
            Variant::H2c => ProtocolKind::H2c,
            Variant::H2 => ProtocolKind::H2,
            Variant::H3 => ProtocolKind::H3,
        }
    }

    /// Whether connections are reused.
    pub fn keepalive(self) -> bool {
        self != Variant::H1Close
    }

    /// Whether the variant runs over TLS (or QUIC's TLS).
    pub fn tls(self) -> bool {
        matches!(self, Variant::H1Tls | Variant::H2 | Variant::H3)
    }

    /// The listener it needs.
    pub fn listener(self) -> Listener {
        match self {
            Variant::H1 | Variant::H1Close | Variant::H2c => Listener::Http,
            Variant::H1Tls | Variant::H2 => Listener::Https,
            Variant::H3 => Listener::H3,
        }
    }

    /// Whether it multiplexes streams on a connection (h2/h3), which decides its best shape.
    pub fn multiplexed(self) -> bool {
        matches!(self, Variant::H2c | Variant::H2 | Variant::H3)
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        let alias = match t.as_str() {
            "h1-keepalive" | "http1" | "http/1.1" => "h1",
            "h1-nokeepalive" | "h1-no-keepalive" => "h1-close",
            "h1s" | "https1" => "h1-tls",
            "http2" => "h2",
            "http3" => "h3",
            other => other,
        };
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == alias)
            .ok_or_else(|| {
                format!("'{text}' is not a protocol (one of h1, h1-close, h1-tls, h2c, h2, h3)")
            })
    }
}

impl TryFrom<String> for Variant {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Variant> for String {
    fn from(v: Variant) -> String {
        v.name().to_string()
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert_eq!("http2".parse::<Variant>().unwrap(), Variant::H2);
        assert!("spdy".parse::<Variant>().is_err());
    }
}
