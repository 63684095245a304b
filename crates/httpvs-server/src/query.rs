//! The query language of responses (`size`, `delay`, `status`, `close`, `header`, with probability
//! lists), parsed into a `ResponseSpec` without I/O, and drawn into one `ResponsePlan` per request.

use http::{HeaderName, HeaderValue};
use std::fmt;
use std::time::Duration;

/// Largest body `size=` may ask for; bodies are streamed from a shared buffer, so this bounds time, not memory.
pub const MAX_SIZE: u64 = 16 << 30;
/// Longest `delay=`; longer would hold connections past any sensible test.
pub const MAX_DELAY: Duration = Duration::from_secs(600);
/// Probability resolution: a list's weights are kept in parts per million.
const PPM: u32 = 1_000_000;

/// A parameter with a value drawn per request: `(value, cumulative ppm upper bound)`; past the last
/// bound the default applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice<T> {
    options: Vec<(T, u32)>,
}

impl<T: Copy> Choice<T> {
    /// Picks a value for a uniform draw in `0..1_000_000`; `None` means "the default".
    pub fn pick(&self, draw_ppm: u32) -> Option<T> {
        self.options
            .iter()
            .find(|(_, bound)| draw_ppm < *bound)
            .map(|(v, _)| *v)
    }

    /// Whether the value is the same on every request (no draw needed).
    fn is_certain(&self) -> bool {
        self.options.len() == 1 && self.options[0].1 == PPM
    }
}

/// What a request's query asks of its response, before any probability is drawn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponseSpec {
    /// `size=`: body bytes.
    pub size: Option<Choice<u64>>,
    /// `delay=`: wait before the response.
    pub delay: Option<Choice<Duration>>,
    /// `status=`: response status code.
    pub status: Option<Choice<u16>>,
    /// `close=`: close the connection (h1) or send GOAWAY (h2, h3) after the response.
    pub close: Option<Choice<bool>>,
    /// `header=name:value`, repeatable: extra response headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// One request's response, with every probability drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponsePlan {
    /// Status code.
    pub status: u16,
    /// Body size; `None` means the default body (the fixed one, or the echoed request body).
    pub size: Option<u64>,
    /// Wait before answering.
    pub delay: Option<Duration>,
    /// Close or GOAWAY after this response.
    pub close: bool,
}

impl ResponseSpec {
    /// Draws a plan; `draw` yields uniform numbers in `0..1_000_000` and is called only when a list needs it.
    pub fn plan(&self, mut draw: impl FnMut() -> u32) -> ResponsePlan {
        fn pick<T: Copy>(choice: &Option<Choice<T>>, draw: &mut impl FnMut() -> u32) -> Option<T> {
            let c = choice.as_ref()?;
            c.pick(if c.is_certain() { 0 } else { draw() })
        }
        ResponsePlan {
            status: pick(&self.status, &mut draw).unwrap_or(200),
            size: pick(&self.size, &mut draw),
            delay: pick(&self.delay, &mut draw).filter(|d| !d.is_zero()),
            close: pick(&self.close, &mut draw).unwrap_or(false),
        }
    }
}

/// A malformed query parameter: which one and why; the server answers 400 with this text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The parameter name.
    pub param: &'static str,
    /// Why its value is wrong.
    pub reason: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad query parameter `{}`: {}", self.param, self.reason)
    }
}

impl std::error::Error for QueryError {}

/// Parses a raw query string (without `?`). Unknown parameters are ignored, as Fortio does.
pub fn parse_query(query: &str) -> Result<ResponseSpec, QueryError> {
    let mut spec = ResponseSpec::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(raw_value);
        match percent_decode(raw_name).as_str() {
            "size" => spec.size = Some(parse_choice("size", &value, parse_size)?),
            "delay" => spec.delay = Some(parse_choice("delay", &value, parse_duration)?),
            "status" => spec.status = Some(parse_choice("status", &value, parse_status)?),
            "close" => spec.close = Some(parse_choice("close", &value, parse_bool)?),
            "header" => spec.headers.push(parse_header(&value)?),
            _ => {}
        }
    }
    Ok(spec)
}

/// Parses `v`, `v:pct` or `v1:pct1,v2:pct2,...` (percentages may be fractional and sum to at most 100).
fn parse_choice<T>(
    param: &'static str,
    value: &str,
    parse_one: fn(&str) -> Result<T, String>,
) -> Result<Choice<T>, QueryError> {
    let err = |reason: String| QueryError { param, reason };
    if value.is_empty() {
        return Err(err("empty value".into()));
    }
    let entries: Vec<&str> = value.split(',').collect();
    let mut options = Vec::with_capacity(entries.len());
    let mut total_ppm: u64 = 0;
    for entry in &entries {
        let (v, ppm) = match entry.rsplit_once(':') {
            Some((v, pct)) => (v, parse_percent(pct).map_err(&err)?),
            None if entries.len() == 1 => (*entry, PPM),
            None => {
                return Err(err(format!(
                    "`{entry}` needs a percentage (VALUE:PERCENT) in a list"
                )))
            }
        };
        total_ppm += u64::from(ppm);
        if total_ppm > u64::from(PPM) {
            return Err(err("percentages add up to more than 100".into()));
        }
        let parsed = parse_one(v).map_err(&err)?;
        options.push((parsed, total_ppm as u32));
    }
    Ok(Choice { options })
}

fn parse_percent(text: &str) -> Result<u32, String> {
    let pct: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a percentage"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(format!("percentage {text} is not within 0..100"));
    }
    Ok((pct * f64::from(PPM) / 100.0).round() as u32)
}

/// Parses `1024`, `1k`, `64k`, `1m`, `1g` (binary multiples; a trailing `b`/`ib` is allowed).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a byte count (like 100, 1k, 64k, 1m)");
    let lower = text.to_ascii_lowercase();
    let trimmed = lower.trim_end_matches("ib").trim_end_matches('b');
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let multiplier: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(bad()),
    };
    let size = n.checked_mul(multiplier).ok_or_else(bad)?;
    if size > MAX_SIZE {
        return Err(format!("{text} is over the limit of 16g"));
    }
    Ok(size)
}

/// Parses `10ms`, `1s`, `1.5s`, `250us`, `2m`; a bare number is milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration (like 10ms, 1s, 1.5s)");
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().map_err(|_| bad())?;
    let seconds_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "" | "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        _ => return Err(bad()),
    };
    let secs = n * seconds_per_unit;
    if !secs.is_finite() || secs > MAX_DELAY.as_secs_f64() {
        return Err(format!("{text} is over the limit of 600s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_status(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(code) if (200..=599).contains(&code) => Ok(code),
        _ => Err(format!("`{text}` is not a final status code (200..599)")),
    }
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!(
            "`{text}` is not 1 or 0 (nor true, yes, false or no)"
        )),
    }
}

/// Headers that would change message framing or connection handling, so a query may not set
/// them; the connection-specific ones (RFC 9113 §8.2.2, RFC 9114 §4.2) would also make every
/// h2 and h3 response malformed (`proxy-connection` did: nghttp and curl refused it).
const FORBIDDEN_HEADERS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "proxy-connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), QueryError> {
    let err = |reason: String| QueryError {
        param: "header",
        reason,
    };
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| err(format!("`{text}` is not NAME:VALUE")))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| err(format!("`{name}` is not a header name")))?;
    if FORBIDDEN_HEADERS.contains(&name.as_str()) {
        return Err(err(format!("`{name}` cannot be set from the query")));
    }
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| err(format!("`{value}` is not a header value")))?;
    Ok((name, value))
}

/// Decodes `%XX` and `+` (as a space); invalid escapes are kept as written.
fn percent_decode(text: &str) -> String {
    if !text.contains(['%', '+']) {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
