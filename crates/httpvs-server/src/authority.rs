//! Whether a Host header or an `:authority` names an origin as RFC 9112 §3.2 asks: `uri-host
//! [ ":" port ]` (RFC 3986 §3.2.2-3.2.3) with a host that is not empty (RFC 9110 §4.2.1: an
//! http(s) URI with an empty host is invalid) and no userinfo (RFC 9113 §8.3.1). One pass over
//! the bytes, no allocation: it runs on every request, fast paths included.
//!
//! Like nginx, a request with an invalid Host gets 400 on HTTP/1.1; unlike nginx (which checks
//! only for "..", path separators, spaces and control bytes), a character outside the grammar
//! (`@`, `"`, `<`, `{`, ...) is invalid too.

use std::net::Ipv6Addr;

/// Whether `value` is `uri-host [ ":" port ]` with a non-empty host.
pub fn is_valid(value: &[u8]) -> bool {
    // The common case in one table-driven pass: a name or IPv4 address, maybe a port.
    match value.iter().position(|&b| !REG_NAME_BYTE[usize::from(b)]) {
        None => !value.is_empty(),
        Some(colon) if value[colon] == b':' => {
            colon > 0 && value[colon + 1..].iter().all(u8::is_ascii_digit)
        }
        Some(_) => is_valid_in_full(value),
    }
}

/// Bytes a reg-name takes as they are: unreserved and sub-delims (not `%`, which starts a
/// pct-encoded triplet).
static REG_NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_unreserved_or_sub_delim(b as u8);
        b += 1;
    }
    table
};

/// The whole grammar: IP literals and pct-encoded names as well.
fn is_valid_in_full(value: &[u8]) -> bool {
    let (host_ok, rest) = match value.strip_prefix(b"[") {
        Some(literal) => {
            let Some(end) = literal.iter().position(|&b| b == b']') else {
                return false;
            };
            (is_ip_literal(&literal[..end]), &literal[end + 1..])
        }
        None => {
            let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
            (end > 0 && is_reg_name(&value[..end]), &value[end..])
        }
    };
    host_ok
        && match rest.split_first() {
            None => true,
            Some((b':', port)) => port.iter().all(u8::is_ascii_digit),
            Some(_) => false,
        }
}

/// Whether a decoded request's authority and Host header (those present) are valid, and its
/// path too ([`is_valid_path`]): what the h2 and h3 crates parse (`http::uri::Authority`) lets
/// userinfo and an empty host through, and a path that does not begin with `/`.
pub fn request_names_a_valid_one<B>(request: &http::Request<B>) -> bool {
    let authority = request.uri().authority().map(|a| a.as_str().as_bytes());
    let host = request
        .headers()
        .get(http::header::HOST)
        .map(|h| h.as_bytes());
    let path = request.uri().path().as_bytes();
    authority.is_none_or(is_valid) && host.is_none_or(is_valid) && is_valid_path(path)
}

/// An http(s) request's `:path`: `/` and what follows, or `*` (RFC 9113 §8.3.1, RFC 9114
/// §4.3.1). `noslash` was answered 200 and `noslash?size=5` 400.
pub fn is_valid_path(path: &[u8]) -> bool {
    path.starts_with(b"/") || path == b"*"
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`, which IPv4 addresses also match.
fn is_reg_name(name: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&b) = name.get(at) {
        if b == b'%' {
            let hex = |i: usize| name.get(i).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(at + 1) && hex(at + 2)) {
                return false;
            }
            at += 3;
        } else if is_unreserved_or_sub_delim(b) {
            at += 1;
        } else {
            return false;
        }
    }
    true
}

const fn is_unreserved_or_sub_delim(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\''..=b',' | b';' | b'=')
}

/// What sits between `[` and `]`: an IPv6 address, or `IPvFuture = "v" 1*HEXDIG "." 1*(
/// unreserved / sub-delims / ":" )`.
fn is_ip_literal(literal: &[u8]) -> bool {
    if let Some(future) = literal.strip_prefix(b"v").or(literal.strip_prefix(b"V")) {
        let dot = future.iter().position(|&b| b == b'.').unwrap_or(0);
        let (version, rest) = future.split_at(dot);
        return dot > 0
            && version.iter().all(u8::is_ascii_hexdigit)
            && rest.len() > 1
            && rest[1..]
                .iter()
                .all(|&b| b == b':' || is_unreserved_or_sub_delim(b));
    }
    std::str::from_utf8(literal).is_ok_and(|text| text.parse::<Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_addresses_and_ports_are_valid() {
        for good in [
            "localhost",
            "localhost:8080",
            "example.com",
            "EXAMPLE.com:443",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]",
            "[::1]:8443",
            "[2001:db8::7]",
            "[::ffff:192.0.2.1]:1",
            "[v1.fe80::a+en1]",
            "xn--bcher-kva.example",
            "a_b-c~d",
            "h%41st",
            "host:",
            "!$&'()*+,;=",
        ] {
            assert!(is_valid(good.as_bytes()), "{good:?}");
        }
    }

    #[test]
    fn anything_else_is_invalid() {
        for bad in [
            "",
            ":80",
            "a b",
            " a",
            "a\t",
            "user@host",
            "host/path",
            "host\\x",
            "host:80:80",
            "host:8o",
            "host?q",
            "host#f",
            "h%4",
            "h%zz",
            "[::1",
            "[::1]x",
            "[::1]:a",
            "[]",
            "[1.2.3.4]",
            "[::1%25eth0]",
            "[v.x]",
            "[v1.]",
            "a\"b",
            "<a>",
            "a{b}",
            "caf\u{e9}",
            "a\0b",
        ] {
            assert!(!is_valid(bad.as_bytes()), "{bad:?}");
        }
    }
}
