//! Explains connection churn: why a run opened many more connections than it was asked to.

use crate::config::LoadConfig;
use crate::protocol::ProtocolKind;
use crate::stats::WorkerStats;

/// A sentence when connections opened reach twice the configured connections (each replaced
/// once, as a server closing every 1000 requests does in a short run), else `None`.
/// `kind` names a plain close: a FIN, or over HTTP/3 a CONNECTION_CLOSE.
pub fn churn_diagnosis(
    config: &LoadConfig,
    stats: &WorkerStats,
    kind: ProtocolKind,
) -> Option<String> {
    let c = &stats.connections;
    let configured = u64::from(config.connections);
    // Fewer than the work needed, none failed: the rest were still connecting when the run
    // ended (a lost SYN or QUIC Initial waits out a 1 s retransmit). Each connection takes -m
    // requests at once, so `-n 50 -c 10 -m 10` needs only 5 (its workers opened 6).
    let needed = configured.min(
        stats
            .requests
            .started
            .div_ceil(u64::from(config.streams.max(1))),
    );
    if config.keepalive && c.opened < needed && c.failed_to_open == 0 {
        let opened = if needed < configured {
            format!(
                "only {} connections opened during the run, where its requests needed {} (of {} configured)",
                group(c.opened),
                group(needed),
                group(configured)
            )
        } else {
            format!(
                "only {} of the {} connections opened during the run",
                group(c.opened),
                group(configured)
            )
        };
        return Some(format!(
            "{opened}, and none failed: the others were still connecting at its end (a lost SYN or QUIC Initial waits out a retransmit of 1 s or more; a longer run or --warmup gives them time)"
        ));
    }
    if c.opened < 2 * configured {
        return None;
    }
    if !config.keepalive {
        return Some(format!(
            "{} connections for {} requests: --no-keepalive opens one per request",
            group(c.opened),
            group(stats.requests.started)
        ));
    }
    let closed = c.closed_by_server();
    if closed == 0 {
        let switched = stats
            .status
            .seen()
            .iter()
            .find(|(code, _)| *code == 101)
            .map_or(0, |&(_, n)| n);
        let why = if c.closed_unasked * 2 >= c.opened {
            format!(
                "it sent bytes no request asked for on {} of them (two responses to one request, or stray bytes), and httpvs closes such a connection rather than read them as the next response",
                group(c.closed_unasked)
            )
        } else if switched > 0 {
            format!(
                "it answered 101 Switching Protocols {} times, and httpvs leaves a switched connection rather than reuse it",
                group(switched)
            )
        } else if stats.requests.failed == 0 && c.failed_to_open == 0 {
            "httpvs closed them itself (see Connections)".to_string()
        } else if broke_protocol(stats) {
            // Ours, each after the server broke the protocol: not a failure to open.
            return Some(format!(
                "{} connections opened for {} configured: httpvs closed each after the server broke the protocol on it (see errors; httpvs trace URL shows how)",
                group(c.opened),
                config.connections
            ));
        } else {
            // Not "the server closed none": one that answers garbage and hangs up (http:// to
            // a TLS port) did close them, as a failure this client counts, not as a close.
            return Some(format!(
                "{} connections opened for {} configured: they failed or timed out (see errors)",
                group(c.opened),
                config.connections
            ));
        };
        return Some(format!(
            "{} connections opened for {} configured, though the server closed none: {why}",
            group(c.opened),
            config.connections
        ));
    }
    let every = c.requests_sum_server_closed as f64 / closed as f64;
    // The most common way (the first of equals in this order).
    let with_fin = match kind {
        ProtocolKind::H3 => "with CONNECTION_CLOSE",
        _ => "with FIN",
    };
    let (how, count) = [
        ("with GOAWAY", c.closed_goaway),
        ("with Connection: close", c.closed_connection_close),
        ("with resets", c.closed_reset),
        (with_fin, c.closed_fin),
    ]
    .into_iter()
    .fold(
        (with_fin, 0),
        |most, kind| {
            if kind.1 > most.1 {
                kind
            } else {
                most
            }
        },
    );
    // The most common way, said as such when others came too ("1,004 times with FIN" read
    // beside 950 FINs and 54 resets).
    let how = if count < closed {
        format!("mostly {how}")
    } else {
        how.to_string()
    };
    // The client's own `-H 'Connection: close'` asks the server to close after each answer.
    let asked_to_close = config.headers.iter().any(|(name, value)| {
        name == http::header::CONNECTION && crate::protocol::h1::names_close(value.as_bytes())
    });
    let hint = if stats.requests.succeeded == 0 {
        "it answered none of them (see errors)"
    } else if c.closed_goaway_error >= closed / 2 && c.closed_goaway >= closed / 2 {
        // Not a limit: the server ended them with an error code (`trace` shows which).
        return Some(format!(
            "the server closed connections {} times {how}, {} of them with an error code, not NO_ERROR: it is failing, not reaching a limit per connection (httpvs trace shows the code)",
            group(closed),
            group(c.closed_goaway_error)
        ));
    } else if c.closed_idle >= closed / 2 && !(config.rate.is_none() && every < 1.5) {
        // Closed between requests, not after a count: an idle timeout shorter than the gaps.
        // (In the closed model a gap is only the client's turn-around: a server that closes
        // after every answer without saying so is keep-alive off, below.)
        return Some(format!(
            "the server closed {} idle connections (closed while no request was in flight): its keep-alive idle timeout is shorter than the gaps between requests here (nginx keepalive_timeout); httpvs saw each close and opened a new connection instead of sending on it",
            group(c.closed_idle)
        ));
    } else if asked_to_close && c.closed_connection_close >= closed / 2 {
        "as this run's -H 'Connection: close' asks"
    } else if c.closed_reset >= closed / 2 {
        "check the server's error log and its connection limits"
    } else if every < 0.5 {
        "check the server's error log: it closes connections before answering"
    } else if every < 1.5 {
        "is keep-alive off there?"
    } else if let Some(lost) = lost_to_closes(stats, closed) {
        // A limit per connection ends it with GOAWAY or `Connection: close` and loses
        // nothing; these took requests with them.
        let announced = match kind {
            ProtocolKind::H1 => "Connection: close",
            _ => "GOAWAY",
        };
        return Some(format!(
            "the server closed connections {} times {how}, about every {} requests, with requests in flight: {} failed as the connection closed under them (a limit per connection ends with {announced} and loses none); check the server's error log",
            group(closed),
            group(every.round() as u64),
            group(lost)
        ));
    } else if irregular(c.requests_max, every, config.streams) {
        // A per-connection limit ends every connection at about the same count; these ended
        // anywhere up to the most one carried.
        return Some(format!(
            "the server closed connections {} times {how}, after about {} requests on average but up to {} on one: not a fixed limit per connection (a restart, a reload, an idle timeout?)",
            group(closed),
            group(every.round() as u64),
            group(c.requests_max)
        ));
    } else {
        "check its max requests per connection (nginx keepalive_requests)"
    };
    let cadence = match every.round() as u64 {
        0 => "before completing any request".to_string(),
        1 => "after about every request".to_string(),
        n => format!("about every {} requests", group(n)),
    };
    Some(format!(
        "the server closed connections {} times {how}, {cadence}: {hint}",
        group(closed)
    ))
}

/// Most failed requests failed as `protocol`: the server broke HTTP on their connections.
fn broke_protocol(stats: &WorkerStats) -> bool {
    let protocol = stats
        .errors
        .by_kind
        .get(&crate::error::ErrorKind::Protocol)
        .copied()
        .unwrap_or(0);
    protocol > 0 && protocol * 2 >= stats.requests.failed
}

/// Requests that failed as their connection closed or was reset under them, when they come to
/// one for every other close or more: a server dropping what it was given, not a limit.
fn lost_to_closes(stats: &WorkerStats, closed: u64) -> Option<u64> {
    use crate::error::ErrorKind;
    let lost: u64 = [ErrorKind::ConnectionClosed, ErrorKind::Reset]
        .iter()
        .filter_map(|k| stats.errors.by_kind.get(k))
        .sum();
    (lost > 0 && lost * 2 >= closed).then_some(lost)
}

/// Whether the connections the server closed carried counts too far apart for a limit per
/// connection: under one, none carries much more than the average (a few streams' worth of
/// requests started before the close was seen, and the run's last connections, which carry
/// fewer, only pull the average down).
fn irregular(most: u64, every: f64, streams: u32) -> bool {
    most as f64 > every * 1.25 + f64::from(streams)
}

/// 4495 → "4,495".
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CloseCause;

    #[test]
    fn groups_thousands() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(4495), "4,495");
        assert_eq!(group(1_000_000), "1,000,000");
    }

    /// A config of `connections` x `streams` to a target nothing needs to answer.
    fn shaped(connections: u32, streams: u32) -> crate::LoadConfig {
        crate::LoadConfig::new("http://127.0.0.1:1/")
            .unwrap()
            .shape(connections, streams)
    }

    /// A run whose `n` connections the server closed by `cause`, each after `every` requests
    /// that all succeeded.
    fn closed_every(n: u64, cause: CloseCause, every: u64) -> WorkerStats {
        let mut stats = WorkerStats::default();
        stats.connections.opened = n;
        for _ in 0..n {
            stats.connections.retire(cause, every);
        }
        stats.requests.succeeded = n * every;
        stats
    }

    #[test]
    fn names_the_keepalive_limit() {
        let config = shaped(4, 50);
        let mut stats = closed_every(200, CloseCause::Goaway, 100);
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert_eq!(
            d,
            "the server closed connections 200 times with GOAWAY, about every 100 requests: check its max requests per connection (nginx keepalive_requests)"
        );
        // Each of the 4 replaced once (8 opened): the limit shows in a short run too.
        stats.connections.opened = 8;
        stats.requests.succeeded = 400;
        assert!(churn_diagnosis(&config, &stats, ProtocolKind::H1).is_some());
        stats.connections.opened = 7;
        assert_eq!(churn_diagnosis(&config, &stats, ProtocolKind::H1), None);
    }

    /// Connections httpvs closed after protocol errors (a PUSH_PROMISE, bad padding) are not
    /// ones that "failed or timed out".
    #[test]
    fn connections_closed_after_protocol_errors_say_so() {
        let mut stats = WorkerStats::default();
        stats.connections.opened = 50;
        stats.requests.failed = 50;
        for _ in 0..50 {
            stats.errors.count(crate::error::ErrorKind::Protocol);
        }
        let d = churn_diagnosis(&shaped(2, 1), &stats, ProtocolKind::H2c).unwrap();
        assert_eq!(
            d,
            "50 connections opened for 2 configured: httpvs closed each after the server broke the protocol on it (see errors; httpvs trace URL shows how)"
        );
    }

    /// A server that closes with a bare FIN and loses a request each time is not reaching a
    /// limit: it read "check its max requests per connection (nginx keepalive_requests)"
    /// beside 401 requests failed as connection_closed for 402 closes.
    #[test]
    fn closes_that_took_requests_with_them_are_not_called_a_limit() {
        let config = shaped(4, 4);
        let mut stats = closed_every(402, CloseCause::Fin, 9);
        for _ in 0..401 {
            stats
                .errors
                .count(crate::error::ErrorKind::ConnectionClosed);
        }
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H2c).unwrap();
        assert_eq!(
            d,
            "the server closed connections 402 times with FIN, about every 9 requests, with requests in flight: 401 failed as the connection closed under them (a limit per connection ends with GOAWAY and loses none); check the server's error log"
        );
        // A few lost among many closes are not the pattern.
        let mut stats = closed_every(402, CloseCause::Fin, 9);
        stats
            .errors
            .count(crate::error::ErrorKind::ConnectionClosed);
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H2c).unwrap();
        assert!(d.ends_with("(nginx keepalive_requests)"), "{d}");
    }

    /// Closes of mixed kinds are named by the most common, as such: "1,004 times with FIN"
    /// read beside 950 FINs and 54 resets.
    #[test]
    fn mixed_closes_are_named_mostly() {
        let config = shaped(4, 50);
        let mut stats = closed_every(950, CloseCause::Fin, 100);
        for _ in 0..54 {
            stats.connections.retire(CloseCause::Reset, 100);
        }
        stats.connections.opened = 1004;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(
            d.starts_with("the server closed connections 1,004 times mostly with FIN,"),
            "{d}"
        );
        // The largest count names it, not the first at half or more (1 GOAWAY of 3 read
        // "mostly with GOAWAY").
        let mut stats = closed_every(2, CloseCause::Fin, 100);
        stats.connections.retire(CloseCause::Goaway, 100);
        stats.connections.opened = 300;
        let d = churn_diagnosis(&shaped(1, 1), &stats, ProtocolKind::H1).unwrap();
        assert!(d.contains("3 times mostly with FIN"), "{d}");
    }

    /// FINs between requests: in the open model an idle timeout shorter than the gaps; in the
    /// closed model, where a gap is the client's turn-around, a server that closes after every
    /// answer (the note blamed an idle timeout for microsecond gaps).
    #[test]
    fn closes_between_requests_after_every_answer_are_keepalive_off_in_the_closed_model() {
        let mut stats = closed_every(100, CloseCause::Fin, 1);
        stats.connections.closed_idle = 100;
        let closed_model = shaped(2, 1);
        let d = churn_diagnosis(&closed_model, &stats, ProtocolKind::H1).unwrap();
        assert_eq!(
            d,
            "the server closed connections 100 times with FIN, after about every request: is keep-alive off there?"
        );
        let mut open_model = shaped(2, 1);
        open_model.rate = Some(2.0);
        let d = churn_diagnosis(&open_model, &stats, ProtocolKind::H1).unwrap();
        assert!(d.contains("100 idle connections"), "{d}");
    }

    /// Connections left after a 101 are not "failed or timed out" when nothing failed (the
    /// note said so to a run with no error).
    #[test]
    fn switched_connections_are_named_not_blamed_on_failures() {
        let config = shaped(2, 1);
        let mut stats = WorkerStats::default();
        stats.connections.opened = 50;
        stats.requests.succeeded = 50;
        for _ in 0..50 {
            stats.status.count(101);
        }
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(d.ends_with("it answered 101 Switching Protocols 50 times, and httpvs leaves a switched connection rather than reuse it"), "{d}");
        stats.status = Default::default();
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(
            d.ends_with("httpvs closed them itself (see Connections)"),
            "{d}"
        );
        stats.requests.failed = 3;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(d.ends_with("they failed or timed out (see errors)"), "{d}");
        // A server that hangs up on garbage closed them, as failures: not "closed none".
        assert!(!d.contains("closed none"), "{d}");
    }

    /// Fewer connections than asked, none failed, and work for all: the rest were still
    /// connecting (h3 at -c 256 against a server whose socket dropped Initials opened 110 of
    /// 256 and said nothing). A -n run too short to need them all is not flagged.
    #[test]
    fn connections_still_connecting_at_the_end_are_said() {
        let config = shaped(256, 1);
        let mut stats = WorkerStats::default();
        stats.connections.opened = 110;
        stats.requests.started = 60_000;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap_or_default();
        assert!(
            d.starts_with("only 110 of the 256 connections opened"),
            "{d}"
        );
        stats.requests.started = 100;
        assert_eq!(churn_diagnosis(&config, &stats, ProtocolKind::H1), None);
        stats.requests.started = 60_000;
        stats.connections.failed_to_open = 3;
        assert_eq!(churn_diagnosis(&config, &stats, ProtocolKind::H1), None);
        // `-n 50 -c 10 -m 10` needs 5 connections at most (each worker opened 3): all it
        // needed opened, none is missing.
        let config = shaped(10, 10);
        let mut stats = WorkerStats::default();
        stats.connections.opened = 6;
        stats.requests.started = 50;
        assert_eq!(churn_diagnosis(&config, &stats, ProtocolKind::H1), None);
        // ... but 3 where 6 were needed (`-n 60`) is connections lost.
        stats.connections.opened = 3;
        stats.requests.started = 60;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap_or_default();
        assert!(
            d.starts_with(
                "only 3 connections opened during the run, where its requests needed 6 (of 10 configured), and none failed"
            ),
            "{d}"
        );
    }

    /// GOAWAYs with an error code every few requests are the server failing, not its
    /// keep-alive limit (the note pointed at nginx's keepalive_requests).
    #[test]
    fn goaways_with_an_error_code_are_not_called_a_limit() {
        let config = shaped(2, 4);
        let mut stats = closed_every(19, CloseCause::Goaway, 5);
        stats.connections.closed_goaway_error = 19;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(d.contains("19 of them with an error code"), "{d}");
        assert!(!d.contains("keepalive_requests"), "{d}");
    }

    /// The run's own `-H 'Connection: close'` is named as the cause, not the server's
    /// keep-alive (the note asked "is keep-alive off there?").
    #[test]
    fn a_close_the_run_asked_for_is_said_to_be_asked() {
        let mut config = shaped(1, 1);
        config.headers.push((
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        ));
        let stats = closed_every(20, CloseCause::ConnectionClose, 1);
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(
            d.ends_with("as this run's -H 'Connection: close' asks"),
            "{d}"
        );
    }

    /// nginx reloaded three times under load: closes at 5,184 to 17,821 requests are not a
    /// keepalive_requests limit, and the note no longer points there.
    #[test]
    fn closes_far_apart_are_not_called_a_limit() {
        let config = shaped(4, 1);
        let mut stats = WorkerStats::default();
        stats.connections.opened = 16;
        for n in [5_184, 17_821, 9_000, 7_707] {
            for _ in 0..3 {
                stats.connections.retire(CloseCause::Fin, n);
            }
        }
        stats.requests.succeeded = 119_136;
        let d = churn_diagnosis(&config, &stats, ProtocolKind::H1).unwrap();
        assert!(d.contains("up to 17,821 on one: not a fixed limit"), "{d}");
        assert!(!d.contains("keepalive_requests"), "{d}");
    }
}
