//! `--connect-to`: open connections somewhere other than the URL's host and port, keeping the
//! URL's name for the Host header, `:authority`, SNI and the certificate check.
//!
//! Two spellings, as users bring them: h2load's `HOST[:PORT]` (connect there whatever the URL),
//! and curl's (and oha's) `HOST1:PORT1:HOST2:PORT2`, which sends connections for the URL's
//! `HOST1:PORT1` to `HOST2:PORT2`, an empty part matching any host or port or keeping the URL's.
//! An IPv6 address goes in brackets, as in a URL.

use std::fmt;

/// Where connections go instead of the URL's host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTo {
    /// Curl's form: the URL host this applies to (`None`: any).
    from_host: Option<String>,
    /// Curl's form: the URL port this applies to (`None`: any).
    from_port: Option<u16>,
    /// The host to connect to (a name or an address, brackets removed); `None` keeps the URL's.
    host: Option<String>,
    /// The port to connect to; `None` keeps the URL's.
    port: Option<u16>,
    /// As given, for the report and error lines.
    given: String,
}

impl ConnectTo {
    /// Reads `HOST[:PORT]` or `HOST1:PORT1:HOST2:PORT2`.
    pub fn parse(text: &str) -> Result<ConnectTo, String> {
        // Quoted whole when short, else cut (a 100 KB value filled the one line).
        let bad = |why: &str| format!("--connect-to {}: {why}", crate::config::shown_url(text));
        let parts = split_colons(text).ok_or_else(|| bad("an unclosed [ in an IPv6 address"))?;
        let (from, to) = match parts.as_slice() {
            [host] => ((None, None), (Some(*host), None)),
            [host, port] => ((None, None), (Some(*host), Some(*port))),
            [fh, fp, h, p] => ((Some(*fh), Some(*fp)), (Some(*h), Some(*p))),
            _ => {
                return Err(bad(
                    "use HOST[:PORT] (as h2load) or HOST1:PORT1:HOST2:PORT2 (as curl); \
                     an IPv6 address goes in brackets",
                ))
            }
        };
        let single = parts.len() == 1;
        let host = |h: Option<&str>| -> Result<Option<String>, String> {
            match h.map(unbracket) {
                None | Some("") => Ok(None),
                // RFC 1035's bound on a name; it was looked up, and echoed whole.
                Some(h) if h.len() > 253 => Err(bad(&format!(
                    "a host of {} bytes is not a name (at most 253)",
                    h.len()
                ))),
                Some(h) if h.contains(['/', '?', '#', '@', ' ']) => {
                    Err(bad(&format!("{h:?} is not a host")))
                }
                // `::1:8080` reads as curl's form for any host and port, to host `1` (which
                // resolves to 0.0.0.1): a bare number is no host anyone means.
                Some(h) if h.bytes().all(|b| b.is_ascii_digit()) && single => Err(bad(&format!(
                    "{h:?} is not a host; a port alone is :{h} (the URL's host, this port)"
                ))),
                Some(h) if h.bytes().all(|b| b.is_ascii_digit()) => Err(bad(&format!(
                    "{h:?} is not a host; an IPv6 address goes in brackets, as [::1]:8080"
                ))),
                Some(h) => Ok(Some(h.to_ascii_lowercase())),
            }
        };
        let port = |p: Option<&str>| -> Result<Option<u16>, String> {
            match p {
                None | Some("") => Ok(None),
                Some(p) => match crate::config::parse_port(p) {
                    Some(0) | None => Err(bad(&format!("{p:?} is not a port (1-65535)"))),
                    Some(n) => Ok(Some(n)),
                },
            }
        };
        let out = ConnectTo {
            from_host: host(from.0)?,
            from_port: port(from.1)?,
            host: host(to.0)?,
            port: port(to.1)?,
            given: text.to_string(),
        };
        if parts.len() == 1 && out.host.is_none() {
            return Err(bad("no host"));
        }
        Ok(out)
    }

    /// The host connections to `url` go to: `rule`'s when one is given (see
    /// [`ConnectTo::route`]), else the URL's own (as written, brackets and all).
    pub fn dialled_host(rule: Option<&ConnectTo>, url: &http::Uri) -> Result<String, String> {
        let host = url.host().unwrap_or_default();
        match rule {
            Some(rule) => Ok(rule.route(host, crate::config::port_or_default(url))?.0),
            None => Ok(host.to_string()),
        }
    }

    /// Where connections for the URL's `host` (as written, brackets and all) and `port` go,
    /// or an error line when this is curl's form for another host or port: httpvs loads one
    /// origin, so a rule that does not apply to it is a mistake, not a no-op.
    pub fn route(&self, host: &str, port: u16) -> Result<(String, u16), String> {
        let url_host = unbracket(host).to_ascii_lowercase();
        let host_applies = self.from_host.as_ref().is_none_or(|h| *h == url_host);
        let port_applies = self.from_port.is_none_or(|p| p == port);
        if !(host_applies && port_applies) {
            return Err(format!(
                "--connect-to {:?} is for {}:{}, and the URL is {url_host}:{port}",
                self.given,
                self.from_host.as_deref().unwrap_or("(any host)"),
                self.from_port
                    .map_or("(any port)".to_string(), |p| p.to_string())
            ));
        }
        Ok((
            self.host.clone().unwrap_or(url_host),
            self.port.unwrap_or(port),
        ))
    }
}

impl fmt::Display for ConnectTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

/// Splits at colons outside brackets; `None` for an unclosed bracket.
fn split_colons(text: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut start, mut depth) = (0, 0u32);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1)?,
            ':' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    (depth == 0).then(|| {
        parts.push(&text[start..]);
        parts
    })
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(rule: &str, host: &str, port: u16) -> Result<(String, u16), String> {
        ConnectTo::parse(rule)?.route(host, port)
    }

    #[test]
    fn h2loads_form_replaces_host_and_optionally_port() {
        assert_eq!(
            route("127.0.0.1:8443", "svc.test", 443),
            Ok(("127.0.0.1".into(), 8443))
        );
        assert_eq!(
            route("backend-2", "svc.test", 443),
            Ok(("backend-2".into(), 443))
        );
        assert_eq!(route("[::1]:9", "svc.test", 443), Ok(("::1".into(), 9)));
        assert_eq!(route("[::1]", "svc.test", 80), Ok(("::1".into(), 80)));
    }

    #[test]
    fn curls_form_applies_to_its_host_and_port_only() {
        assert_eq!(
            route("svc.test:443:127.0.0.1:8443", "svc.test", 443),
            Ok(("127.0.0.1".into(), 8443))
        );
        assert_eq!(
            route("SVC.test::[::1]:", "svc.test", 8080),
            Ok(("::1".into(), 8080))
        );
        assert_eq!(route(":::8443", "[::1]", 443), Ok(("::1".into(), 8443)));
        let other = route("other.test:443:127.0.0.1:8443", "svc.test", 443).unwrap_err();
        assert!(other.contains("is for other.test:443"), "{other}");
        assert!(route("svc.test:80:127.0.0.1:1", "svc.test", 443).is_err());
    }

    #[test]
    fn bad_rules_are_one_clear_line() {
        for bad in [
            "",
            "127.0.0.1:0",
            "127.0.0.1:99999",
            "127.0.0.1:x",
            "127.0.0.1:+80",
            "a:b:c",
            "[::1",
            "::1",
            "http://127.0.0.1/",
            "a:1:b:2:c",
            // An unbracketed IPv6 address and port: curl's form to host `1` (0.0.0.1).
            "::1:8080",
            "fe80::1:8080",
        ] {
            let e = ConnectTo::parse(bad).unwrap_err();
            assert!(e.starts_with("--connect-to "), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = ConnectTo::parse("::1:8080").unwrap_err();
        assert!(e.contains("goes in brackets, as [::1]:8080"), "{e}");
        let e = ConnectTo::parse("8080").unwrap_err();
        assert!(e.contains("a port alone is :8080"), "{e}");
        // A 100 KB host is refused in a line of its own size, not echoed whole.
        let e = ConnectTo::parse(&"a".repeat(100_000)).unwrap_err();
        assert!(e.contains("a host of 100000 bytes is not a name"), "{e}");
        assert!(e.len() < 300, "{} bytes", e.len());
        // curl's any-host form to a name or a bracketed address still reads.
        assert!(ConnectTo::parse("::127.0.0.1:8080").is_ok());
        assert!(ConnectTo::parse("::[::1]:8080").is_ok());
    }
}
