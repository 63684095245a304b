//! Units a plan is written in: byte sizes (`64k`), durations (`1.5s`, `500ms`) and shapes (`4x32`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A byte count written as `100`, `1k`, `64k`, `1m` (powers of 1024, as the server's `size=` reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "SizeOrNumber", into = "String")]
pub struct ByteSize(pub u64);

/// TOML lets users write `size = 1024` or `size = "1k"`; both mean a byte count.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeOrNumber {
    Number(u64),
    Text(String),
}

impl TryFrom<SizeOrNumber> for ByteSize {
    type Error = String;
    fn try_from(value: SizeOrNumber) -> Result<Self, String> {
        match value {
            SizeOrNumber::Number(n) => Ok(ByteSize(n)),
            SizeOrNumber::Text(s) => s.parse(),
        }
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        let t = t.strip_suffix('b').unwrap_or(&t);
        let (digits, mult) = match t.chars().last() {
            Some('k') => (&t[..t.len() - 1], 1024),
            Some('m') => (&t[..t.len() - 1], 1024 * 1024),
            Some('g') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
            _ => (t, 1),
        };
        digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(mult))
            .map(ByteSize)
            .ok_or_else(|| format!("'{text}' is not a size (examples: 100, 1k, 64k, 1m)"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
            write!(f, "{}m", n / (1024 * 1024))
        } else if n >= 1024 && n.is_multiple_of(1024) {
            write!(f, "{}k", n / 1024)
        } else {
            write!(f, "{n}")
        }
    }
}

impl From<ByteSize> for String {
    fn from(s: ByteSize) -> String {
        s.to_string()
    }
}

/// A duration written as `1s`, `1.5s`, `500ms`, `2m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Span(pub Duration);

impl TryFrom<String> for Span {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl FromStr for Span {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let bad = || format!("'{text}' is not a duration (examples: 500ms, 1.5s, 2m, 1h)");
        let (num, unit) = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .map_or((t, "s"), |i| (&t[..i], &t[i..]));
        let value: f64 = num.parse().map_err(|_| bad())?;
        let secs = match unit.trim() {
            "us" | "µs" => value / 1e6,
            "ms" => value / 1e3,
            "s" | "" => value,
            "m" | "min" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(bad()),
        };
        if !secs.is_finite() || secs < 0.0 {
            return Err(bad());
        }
        if secs > 86_400.0 {
            return Err(format!(
                "'{text}' is over a day, the most a duration may be"
            ));
        }
        Ok(Span(Duration::from_secs_f64(secs)))
    }
}

impl fmt::Display for Span {
    /// Whole seconds or milliseconds where they are exact, else microseconds: `--print-plan`
    /// must read back as it was (`100us` printed `0s`, which a plan refuses as a duration).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if !nanos.is_multiple_of(1_000_000) {
            return write!(f, "{}us", ((nanos + 500) / 1000).max(1));
        }
        let ms = self.0.as_millis();
        if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl From<Span> for String {
    fn from(s: Span) -> String {
        s.to_string()
    }
}

/// A client shape: connections x concurrent streams per connection (`64` means 64x1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "ShapeText", into = "String")]
pub struct Shape {
    /// Connections.
    pub connections: u32,
    /// Concurrent streams per connection (h1: pipelining depth; 1 means none).
    pub streams: u32,
}

/// A shape may be written `64` (a TOML integer) or `"4x32"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum ShapeText {
    Number(u32),
    Text(String),
}

impl TryFrom<ShapeText> for Shape {
    type Error = String;
    fn try_from(value: ShapeText) -> Result<Self, String> {
        match value {
            ShapeText::Number(n) => format!("{n}").parse(),
            ShapeText::Text(s) => s.parse(),
        }
    }
}

impl Shape {
    /// Requests in flight at once.
    pub fn in_flight(&self) -> u32 {
        self.connections.saturating_mul(self.streams)
    }

    /// The shape that ran, when the server's stream limit cut the streams asked for to
    /// `streams_capped`.
    pub fn ran(self, streams_capped: Option<u32>) -> Shape {
        Shape {
            connections: self.connections,
            streams: streams_capped.map_or(self.streams, |cap| cap.min(self.streams)),
        }
    }
}

impl FromStr for Shape {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "'{text}' is not a shape (CONNECTIONSxSTREAMS, e.g. 64 or 4x32, each 1..=10000)"
            )
        };
        let t = text.trim().to_ascii_lowercase();
        let (c, m) = t.split_once(['x', '*']).unwrap_or((&t, "1"));
        let connections: u32 = c.trim().parse().map_err(|_| bad())?;
        let streams: u32 = m.trim().parse().map_err(|_| bad())?;
        if !(1..=10_000).contains(&connections) || !(1..=10_000).contains(&streams) {
            return Err(bad());
        }
        // Load's own cap, said before the run: `200x10000` ran the whole matrix first and
        // then said "did not run" under its row.
        let in_flight = u64::from(connections) * u64::from(streams);
        if in_flight > httpvs_load::config::MAX_IN_FLIGHT {
            return Err(format!(
                "'{text}' has {in_flight} requests in flight; at most {} can be",
                httpvs_load::config::MAX_IN_FLIGHT
            ));
        }
        Ok(Shape {
            connections,
            streams,
        })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.streams == 1 {
            write!(f, "{}", self.connections)
        } else {
            write!(f, "{}x{}", self.connections, self.streams)
        }
    }
}

impl From<Shape> for String {
    fn from(s: Shape) -> String {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!("64k".parse::<ByteSize>().unwrap().0, 65536);
        assert_eq!("100".parse::<ByteSize>().unwrap().0, 100);
        assert_eq!("1m".parse::<ByteSize>().unwrap().to_string(), "1m");
        assert!("64q".parse::<ByteSize>().is_err());
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!("1.5s".parse::<Span>().unwrap().0.as_millis(), 1500);
        assert_eq!("500ms".parse::<Span>().unwrap().to_string(), "500ms");
        // Under a millisecond, or between two: printed so that it reads back the same.
        for text in ["100us", "1500us", "2700us"] {
            let span = text.parse::<Span>().unwrap();
            assert_eq!(span.to_string(), text);
            assert_eq!(span.to_string().parse::<Span>().unwrap(), span);
        }
        assert_eq!("2.7ms".parse::<Span>().unwrap().to_string(), "2700us");
        assert_eq!("2m".parse::<Span>().unwrap().0.as_secs(), 120);
        assert!("fast".parse::<Span>().is_err());
        assert!("-1s".parse::<Span>().is_err());
    }

    #[test]
    fn shapes_parse_and_print() {
        let s: Shape = "8x60".parse().unwrap();
        assert_eq!((s.connections, s.streams), (8, 60));
        assert_eq!("120".parse::<Shape>().unwrap().to_string(), "120");
        assert!("0x4".parse::<Shape>().is_err());
        assert!("axb".parse::<Shape>().is_err());
    }
}
