//! Reads an `Alt-Svc` response header (RFC 7838) for an HTTP/3 alternative on the same host,
//! so `-p auto --alt-svc` can switch an https target to h3 the way browsers do.

use http::header::{HeaderMap, ALT_SVC};

/// The UDP port of the first `h3` alternative on the same host that `headers` advertise.
///
/// Only alternatives without a host (`h3=":443"`) are taken: following one to another host
/// would send load somewhere the user did not name. `Alt-Svc: clear`, draft versions
/// (`h3-29`) and malformed entries yield `None`; malformed input never panics.
pub fn alt_svc_h3(headers: &HeaderMap) -> Option<u16> {
    headers
        .get_all(ALT_SVC)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(h3_port_in)
}

/// The port of the first same-host `h3` alternative in one Alt-Svc field value.
pub fn h3_port_in(value: &str) -> Option<u16> {
    split_outside_quotes(value, ',').find_map(|alternative| {
        let first = split_outside_quotes(alternative, ';').next()?;
        let (protocol, authority) = first.trim().split_once('=')?;
        if protocol.trim() != "h3" {
            return None;
        }
        let authority = authority.trim().strip_prefix('"')?.strip_suffix('"')?;
        let port = authority.strip_prefix(':')?;
        crate::config::parse_port(port).filter(|p| *p != 0)
    })
}

/// Splits on `sep` except inside double-quoted strings (ports are quoted, parameters may be).
fn split_outside_quotes(s: &str, sep: char) -> impl Iterator<Item = &str> {
    let mut in_quotes = false;
    let mut escaped = false;
    s.split(move |c: char| {
        if escaped {
            escaped = false;
        } else if c == '\\' && in_quotes {
            escaped = true;
        } else if c == '"' {
            in_quotes = !in_quotes;
        }
        c == sep && !in_quotes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_same_host_h3() {
        assert_eq!(h3_port_in(r#"h3=":443"; ma=2592000"#), Some(443));
        assert_eq!(
            h3_port_in(r#"h3-29=":8443", h3=":9443"; ma=86400; persist=1"#),
            Some(9443)
        );
        assert_eq!(h3_port_in(r#"h2=":443", h3=":4433""#), Some(4433));
    }

    #[test]
    fn skips_other_hosts_drafts_clear_and_garbage() {
        assert_eq!(h3_port_in(r#"h3="alt.example.com:443""#), None);
        assert_eq!(h3_port_in(r#"h3-29=":443""#), None);
        assert_eq!(h3_port_in("clear"), None);
        assert_eq!(h3_port_in(r#"h3=":0""#), None);
        assert_eq!(h3_port_in(r#"h3=":99999""#), None);
        assert_eq!(h3_port_in(r#"h3=":+443""#), None);
        assert_eq!(h3_port_in(r#"h3=:443"#), None);
        for junk in [
            "",
            "=",
            "\"",
            ",,,",
            "h3=\"",
            "h3=\":",
            ";;=\"\"",
            "h3=\":44\\\"3\"",
        ] {
            assert_eq!(h3_port_in(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn a_quoted_comma_does_not_split_alternatives() {
        assert_eq!(h3_port_in(r#"h2=":1"; x="a,b", h3=":2""#), Some(2));
    }

    #[test]
    fn reads_from_a_header_map() {
        let mut headers = HeaderMap::new();
        headers.append(ALT_SVC, "h2=\":443\"".parse().unwrap());
        headers.append(ALT_SVC, "h3=\":8443\"; ma=60".parse().unwrap());
        assert_eq!(alt_svc_h3(&headers), Some(8443));
        assert_eq!(alt_svc_h3(&HeaderMap::new()), None);
    }
}
