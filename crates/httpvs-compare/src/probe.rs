//! Probing a user's server: which of the six protocols it speaks, by a two-request trial of each.
//!
//! The trial is the load generator itself: `-p h2` offers only h2 in ALPN, `-p h2c` sends the
//! prior-knowledge preface, `-p h3` makes a real QUIC handshake. So "speaks" means "the same
//! client compare measures with got responses", and a refusal comes back as a classified reason.

use crate::load_driver::Endpoints;
use crate::results::Skipped;
use crate::variant::{Listener, Variant};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, TlsOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The endpoints a user URL offers: its scheme decides cleartext or TLS (h3 on the same port).
pub fn endpoints(
    url: &http::Uri,
    tls: TlsOptions,
    connect_to: Option<httpvs_load::connect_to::ConnectTo>,
) -> Endpoints {
    let authority = url.authority().map_or("", |a| a.as_str());
    let base = format!("{}://{authority}", url.scheme_str().unwrap_or("http"));
    let https = url.scheme_str() == Some("https");
    Endpoints {
        http: (!https).then(|| base.clone()),
        https: https.then(|| base.clone()),
        h3: https.then_some(base),
        tls,
        connect_to,
    }
}

/// Splits `variants` into those the server speaks and those skipped, with why. Setting `stop`
/// (Ctrl-C) ends the trial under way and skips the rest: the caller sees it set.
pub fn probe(
    endpoints: &Endpoints,
    path: &str,
    variants: &[Variant],
    stop: &Arc<AtomicBool>,
) -> (Vec<Variant>, Vec<Skipped>) {
    let mut speaks = Vec::new();
    let mut skipped = Vec::new();
    for v in variants {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match trial(endpoints, path, *v, stop) {
            Ok(()) => speaks.push(*v),
            Err(reason) => skipped.push(Skipped {
                name: v.name().into(),
                reason,
            }),
        }
    }
    (speaks, skipped)
}

fn trial(
    endpoints: &Endpoints,
    path: &str,
    variant: Variant,
    stop: &Arc<AtomicBool>,
) -> Result<(), String> {
    let Some(base) = endpoints.base(variant) else {
        return Err(match variant.listener() {
            Listener::Http => {
                "the URL is https://; give an http:// URL to compare cleartext".into()
            }
            _ => "the URL is http://; give an https:// URL to compare TLS and QUIC".into(),
        });
    };
    let mut config = LoadConfig::new(&format!("{base}{path}"))
        .map_err(|e| e.to_string())?
        .protocol(ProtocolChoice::Fixed(variant.kind()))
        .shape(1, 1)
        .threads(1)
        .requests(2)
        .tls(endpoints.tls.clone());
    config.connect_to = endpoints.connect_to.clone();
    config.keepalive = variant.keepalive();
    config.connect_timeout = Duration::from_secs(3);
    config.timeout = Some(Duration::from_secs(5));
    let tried = match variant {
        Variant::H1 | Variant::H1Close | Variant::H1Tls => "no HTTP/1.1 answer",
        Variant::H2c => "no answer to the h2c prior-knowledge preface",
        Variant::H2 => "no h2 over TLS (ALPN h2)",
        Variant::H3 => "no HTTP/3 handshake on the UDP port",
    };
    let report = httpvs_load::run_until(&config, &mut Quiet, stop.clone())
        .map_err(|e| format!("{tried}: {}", crate::load_driver::load_error_line(e)))?;
    if report.requests.succeeded == 0 {
        // "2 failed as protocol", not the bare "protocol x2" it read.
        let why: Vec<String> = report
            .errors
            .iter()
            .map(|e| format!("{} failed as {}", e.count, e.kind))
            .collect();
        // A TLS refusal after a completed handshake: most often a client certificate wanted.
        let note = httpvs_load::report::text::tls_after_handshake_note(&report)
            .map_or(String::new(), |n| format!("; {n}"));
        return Err(format!(
            "{tried}: neither of 2 trial requests got a response ({}){note}",
            why.join(", ")
        ));
    }
    if report.protocol.negotiated != variant.kind().name() {
        return Err(format!(
            "the server answered with {} instead",
            report.protocol.negotiated
        ));
    }
    Ok(())
}
