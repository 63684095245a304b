//! `httpvs trace`: flags, validation into a `TraceConfig`, and printing the trace.
//!
//! Like `nghttp -v`: N requests at once on one connection, every frame or message with its
//! time. Problems with the input exit 2 before anything is sent; a failed exchange is shown
//! in the trace, then one line and exit 1.

use super::common::{
    basic_authorization, check_cacert, check_content_length, client_identity, duration_flag,
    parse_header, take_userinfo, WindowFlags,
};
use super::usage;
use httpvs_load::config::{parse_url, TlsOptions};
use httpvs_load::protocol::{ProtocolKind, RequestSpec};
use httpvs_load::trace::{self, TraceConfig};
use httpvs_load::ProtocolChoice;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `httpvs trace`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Target URL (http:// or https://).
    #[arg(value_name = "URL")]
    url: String,
    /// Protocol: h1, h2c, h2, h3 or auto (ALPN for https, h1 for http).
    #[arg(short = 'p', long, value_name = "PROTO", default_value = "auto")]
    protocol: String,
    /// Requests sent at once on the one connection, 1 to 1000 (h1: pipelined).
    #[arg(
        short = 'm',
        long,
        value_name = "N",
        allow_negative_numbers = true,
        default_value_t = 1
    )]
    requests: u32,
    /// Request method [default: GET, or POST with -d/--data-file, as curl does].
    #[arg(short = 'X', long, value_name = "METHOD")]
    method: Option<String>,
    /// Request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    #[command(flatten)]
    request_body: super::common::BodyFlags,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Client certificate chain (PEM) to show a server that asks for one (mutual TLS), with --key.
    #[arg(long, value_name = "FILE")]
    cert: Option<PathBuf>,
    /// The private key (PEM, unencrypted) of --cert.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Print bodies (as text) instead of only their lengths.
    #[arg(long)]
    body: bool,
    /// One JSON object per event (t_ms, dir, type, ...), the summary last.
    #[arg(long)]
    json: bool,
    /// Bound on the requests, from sending to the last response byte; 0 waits forever (as in
    /// `load`).
    #[arg(
        long,
        value_name = "DUR",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    timeout: String,
    /// Bound on TCP connect plus the TLS or QUIC handshake.
    #[arg(
        long,
        value_name = "DUR",
        default_value = "10s",
        allow_hyphen_values = true
    )]
    connect_timeout: String,
    /// Keep watching this long after the last response (late GOAWAY, PING, close).
    #[arg(
        long,
        value_name = "DUR",
        default_value = "100ms",
        allow_hyphen_values = true
    )]
    linger: String,
    #[command(flatten)]
    windows: WindowFlags,
    /// Connect to HOST[:PORT] instead of the URL's host and port (as h2load), or
    /// HOST1:PORT1:HOST2:PORT2 (as curl); Host, :authority and TLS keep the URL's name
    #[arg(long, value_name = "HOST[:PORT]")]
    connect_to: Option<String>,
}

/// Most requests one trace may send at once: a trace is for reading, not for load.
const MAX_REQUESTS: u32 = 1000;

/// Runs `httpvs trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = config_from(&args)?;
    // Each event prints as it comes, as `nghttp -v` does: a server that takes its time shows
    // where it is. A closed stdout stops the printing, not the trace.
    let json = args.json;
    let mut print = |event: &trace::event::TraceEvent| {
        let mut line = String::new();
        if json {
            line = trace::json::event_json(event).to_string();
            line.push('\n');
        } else {
            trace::text::render_event(&mut line, event);
        }
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
    };
    let traced = trace::run_live(&config, Some(&mut print)).map_err(|e| {
        if e.is_usage() {
            usage(e.to_string())
        } else {
            anyhow::Error::new(e)
        }
    })?;
    let rendered = if args.json {
        trace::json::render(&traced)
    } else {
        trace::text::render(&traced)
    };
    super::common::to_stdout(rendered.as_bytes())?;
    if traced.interrupted {
        // Ctrl-C: what it saw is above; 130, as an interrupted `load`.
        let s = &traced.summary;
        return Err(super::exit_error(
            super::common::INTERRUPTED,
            format!(
                "trace interrupted: {} of {} requests answered",
                s.succeeded, s.requests
            ),
        ));
    }
    match traced.failure {
        Some(failure) => anyhow::bail!("trace failed: {failure}"),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Turns flags into a validated config; every problem is a one-line usage error.
fn config_from(args: &Args) -> anyhow::Result<TraceConfig> {
    // `user:password@` becomes Basic authorization, as in `load` (and curl); the password never
    // reaches an error line.
    let (url, credentials) = take_userinfo(&args.url)?;
    let url = parse_url(&url).map_err(|e| usage(e.to_string()))?;
    let https = url.scheme_str() == Some("https");
    let protocol = ProtocolChoice::parse(&args.protocol).ok_or_else(|| {
        usage(format!(
            "invalid --protocol {:?}: use h1, h2c, h2, h3 or auto",
            args.protocol
        ))
    })?;
    let protocol = match protocol {
        ProtocolChoice::Fixed(ProtocolKind::H2c) if https => {
            return Err(usage("-p h2c is cleartext: use an http:// URL (or -p h2)"))
        }
        ProtocolChoice::Fixed(ProtocolKind::H3) if !https => {
            return Err(usage("-p h3 needs an https:// URL"))
        }
        // As `load` says it: h2 is over TLS, h2c is the cleartext one.
        ProtocolChoice::Fixed(ProtocolKind::H2) if !https => {
            return Err(usage(
                "-p h2 needs an https:// URL (use -p h2c for cleartext HTTP/2)",
            ))
        }
        other => other,
    };
    if args.requests == 0 || args.requests > MAX_REQUESTS {
        return Err(usage(format!(
            "invalid -m {}: use 1 to {MAX_REQUESTS}",
            args.requests
        )));
    }
    if let Some(path) = &args.cacert {
        check_cacert(path)?;
    }
    let windows = args.windows.windows()?;
    windows
        .check(protocol, https)
        .map_err(|e| usage(args.windows.as_given(e)))?;
    let request = RequestSpec {
        method: method(args)?,
        uri: with_root_path(url.clone()),
        headers: with_credentials(
            args.headers
                .iter()
                .map(|h| parse_header(h))
                .collect::<anyhow::Result<_>>()?,
            credentials,
        )?,
        body: args.request_body.body()?,
    };
    check_content_length(&request.headers, &request.body)?;
    Ok(TraceConfig {
        url,
        protocol,
        requests: args.requests,
        request,
        tls: TlsOptions {
            insecure: args.insecure,
            cacert: args.cacert.clone(),
            client_identity: client_identity(args.cert.as_deref(), args.key.as_deref())?,
        },
        connect_timeout: match duration_flag("--connect-timeout", &args.connect_timeout)? {
            // As `load` has it: a bound of 0 would fail every connection unseen.
            zero if zero.is_zero() => return Err(usage("--connect-timeout must be longer than 0")),
            bound => bound,
        },
        timeout: match duration_flag("--timeout", &args.timeout)? {
            zero if zero.is_zero() => std::time::Duration::MAX,
            bound => bound,
        },
        show_body: args.body,
        stop: super::common::interrupt_flag(),
        linger: duration_flag("--linger", &args.linger)?,
        windows,
        connect_to: args
            .connect_to
            .as_deref()
            .map(httpvs_load::connect_to::ConnectTo::parse)
            .transpose()
            .map_err(usage)?,
    })
}

/// `-X` when given; else, as curl does, POST when a body is given and GET otherwise.
fn method(args: &Args) -> anyhow::Result<http::Method> {
    match &args.method {
        Some(m) => http::Method::from_bytes(m.as_bytes())
            .map_err(|_| usage(format!("invalid method {m:?}"))),
        None if args.request_body.given() => Ok(http::Method::POST),
        None => Ok(http::Method::GET),
    }
}

/// "http://host:port" means the root path.
fn with_root_path(uri: http::Uri) -> http::Uri {
    if uri.path_and_query().is_some() {
        return uri;
    }
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    http::Uri::from_parts(parts).unwrap_or(uri)
}

/// `-H` headers, plus Basic authorization from the URL's `user:password@`, if any.
fn with_credentials(
    mut headers: Vec<(http::HeaderName, http::HeaderValue)>,
    credentials: Option<String>,
) -> anyhow::Result<Vec<(http::HeaderName, http::HeaderValue)>> {
    if let Some(credentials) = credentials {
        if headers
            .iter()
            .any(|(n, _)| n == http::header::AUTHORIZATION)
        {
            return Err(usage(
                "credentials given twice: user:password@ and -H Authorization".to_string(),
            ));
        }
        headers.push(basic_authorization(&credentials)?);
    }
    Ok(headers)
}
