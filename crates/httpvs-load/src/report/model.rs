//! The report model: one serde type that text, JSON, compare's HTML and the thresholds all read.
//!
//! Durations are integer microseconds (`_us`) or float seconds (`_s`); byte counts are integers.
//! The JSON form is documented in `docs/schema/load-report.schema.json`; bump [`SCHEMA_VERSION`]
//! on any change that removes or renames a field, and update the schema with every field.

use serde::{Deserialize, Serialize};

/// Version of the JSON report layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a run found out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Layout version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// "httpvs VERSION".
    pub tool: String,
    /// What was loaded.
    pub target: TargetInfo,
    /// Protocol asked for and spoken.
    pub protocol: ProtocolInfo,
    /// The load's shape as configured and as run.
    pub shape: Shape,
    /// Length of the measured part, seconds.
    pub duration_s: f64,
    /// The run was stopped early (Ctrl-C, SIGTERM): it covers what ran until then.
    #[serde(default)]
    pub interrupted: bool,
    /// Requests by outcome.
    pub requests: Requests,
    /// Rates over the measured part.
    pub throughput: Throughput,
    /// Latency (from the intended send time in the open model).
    pub latency: Distribution,
    /// The text histogram's rows of `latency`: up to 12 steps from its min to its max, each
    /// wider than the last by one ratio (so nearly even when the spread is narrow, and
    /// logarithmic when it is wide), empty ones included; `le_us` is a row's upper bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_rows: Vec<Bucket>,
    /// Open model only: latency from the actual send, as uncorrected tools report it.
    pub latency_uncorrected: Option<Distribution>,
    /// `--hgrm` only: `latency` at HdrHistogram's percentile ticks, what wrk2's `--latency`
    /// prints as its "Detailed Percentile spectrum" (rendered by `report::hgrm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_spectrum: Option<Spectrum>,
    /// Open model only: how far sends fell behind their intended times.
    pub schedule: Option<ScheduleLag>,
    /// Where the time went.
    pub phases: Phases,
    /// Responses by status code.
    pub status_codes: Vec<StatusRow>,
    /// Failed requests by error kind.
    pub errors: Vec<ErrorRow>,
    /// Bytes on the wire.
    pub wire: Wire,
    /// Connection lifecycle.
    pub connections: Connections,
    /// QUIC totals (h3 only).
    pub quic: Option<Quic>,
    /// The emulated link the run went through (`--net`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// `--log-file`: where each request's row went; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_log: Option<RequestLogInfo>,
    /// One point per second of the measured part.
    pub series: Vec<SeriesPoint>,
    /// `--fail-on` results (empty without it).
    #[serde(default)]
    pub thresholds: Vec<ThresholdResult>,
}

/// The per-request log (`--log-file`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLogInfo {
    /// The file, as given.
    pub file: String,
    /// Rows written: succeeded + failed when the log is whole.
    pub rows: u64,
    /// Why writing stopped early (the rows after it are missing); absent when the log is whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Report {
    /// Cleartext HTTP/1.1 where no request got an answer and every one failed as the server's
    /// bytes not being HTTP or it hanging up: most often http:// to a TLS port (a TLS server
    /// answers a request line with an alert and closes). The probe only connects TCP, which
    /// such a port accepts, so the run goes on; the report says why it failed, and `load`
    /// exits 1 as for a first connection that fails.
    pub fn no_http_answer(&self) -> bool {
        let cleartext = self.target.url.starts_with("http://");
        let answered_none = self.requests.succeeded == 0 && self.requests.failed > 0;
        // A response head that came (its bytes counted) was HTTP: what broke came after it (a
        // chunked body's framing), and the guesses would mislead.
        let no_head = self.wire.header_received == 0;
        let hung_up = |kind: &str| matches!(kind, "protocol" | "connection_closed" | "reset");
        cleartext
            && self.protocol.is_h1()
            && answered_none
            && no_head
            && self.errors.iter().all(|e| hung_up(&e.kind))
    }
}

impl ProtocolInfo {
    /// Whether HTTP/1.1 was spoken (its closes and retries have no GOAWAY).
    pub fn is_h1(&self) -> bool {
        self.negotiated == "h1"
    }
}

impl RequestLogInfo {
    /// The rows went to stdout and its reader closed the pipe (`--log-file - | head`), which
    /// ends the run: a reader that had what it wanted, not a failure.
    pub fn reader_closed_stdout(&self) -> bool {
        self.file == "-" && self.error.as_deref() == Some(crate::stats::request_log::READER_GONE)
    }
}

/// The target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// URL as given.
    pub url: String,
    /// Further URLs sent in turn after `url` (`httpvs load URL URL...`, `-i FILE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_urls: Vec<String>,
    /// Address connected to.
    pub address: String,
    /// `--connect-to` as given, when connections went there instead of the URL's host and port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_to: Option<String>,
}

/// Protocol asked for and spoken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtocolInfo {
    /// `-p` value: h1, h2c, h2, h3 or auto.
    pub requested: String,
    /// What was spoken: h1, h2c, h2 or h3.
    pub negotiated: String,
    /// ALPN the server chose, if TLS.
    pub alpn: Option<String>,
    /// With `--alt-svc`: what the origin's Alt-Svc header offered and what came of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_svc: Option<String>,
}

/// The load's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// "closed" (fixed concurrency) or "open" (fixed arrival rate).
    pub model: String,
    /// `-c`.
    pub connections: u32,
    /// `-m` as asked.
    pub streams_requested: u32,
    /// Streams per connection as run (capped by the server's limit).
    pub streams: u32,
    /// The server's concurrent-stream limit, if it announced one.
    pub server_max_streams: Option<u32>,
    /// Worker threads.
    pub threads: usize,
    /// `--rate`, requests/s.
    pub rate: Option<f64>,
    /// `-n`.
    pub requests: Option<u64>,
    /// `-z`, seconds.
    pub duration_s: Option<f64>,
    /// `--warmup`, seconds.
    pub warmup_s: f64,
    /// Keep-alive (false with `--no-keepalive`).
    pub keepalive: bool,
    /// Request method.
    pub method: String,
    /// Request body size.
    pub request_body_bytes: u64,
    /// The receive windows advertised when `--window` or `--connection-window` set one (h2,
    /// h2c, h3); absent with the protocol's defaults, and on HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
}

/// The receive flow-control windows the client advertised, in bytes: each the one asked for,
/// or the protocol's default for the other (h2: 2^30-1 each; h3: quinn's 1,250,000 per stream
/// and no connection limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Windows {
    /// Per stream (h2 SETTINGS_INITIAL_WINDOW_SIZE; h3 initial_max_stream_data).
    pub stream_bytes: u64,
    /// Per connection (h2: after the first WINDOW_UPDATE; h3 initial_max_data); absent: no
    /// limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_bytes: Option<u64>,
}

/// Requests by outcome; `started = succeeded + failed + cut_off`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    /// Released by the schedule during the measured part.
    pub started: u64,
    /// Got a complete response (any status).
    pub succeeded: u64,
    /// Got no complete response.
    pub failed: u64,
    /// In flight when the run ended.
    pub cut_off: u64,
    /// Whether the identity holds (it always should; false means a bug, and says so).
    pub identity_holds: bool,
    /// Resends on a new connection (not failures).
    pub retried: Retried,
    /// Requests released in the warm-up (outside the counts above) that outlived it.
    #[serde(default)]
    pub from_warmup: FromWarmup,
}

/// Requests released in the warm-up that ended in the measured part, or never: outside
/// `started`, but a slow server can hold every stream past the warm-up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FromWarmup {
    /// Ended (a response or a failure) after the measured part began.
    pub finished: u64,
    /// Still in flight when the run ended.
    pub cut_off: u64,
}

/// Resends on a new connection, by reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retried {
    /// After a GOAWAY.
    pub goaway: u64,
    /// After REFUSED_STREAM / H3_REQUEST_REJECTED.
    pub refused: u64,
    /// After an h1 connection closed before the response.
    pub connection_closed: u64,
    /// h1: pipelined behind a request that timed out, on the connection closed for it
    /// (absent from reports before it was counted apart from `connection_closed`).
    #[serde(default)]
    pub behind_timeout: u64,
    /// Sum.
    pub total: u64,
}

/// Rates over the measured part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Completed requests (succeeded + failed) per second.
    pub requests_per_s: f64,
    /// Succeeded requests per second.
    pub succeeded_per_s: f64,
    /// Wire bytes received per second.
    pub bytes_received_per_s: f64,
    /// Wire bytes sent per second.
    pub bytes_sent_per_s: f64,
}

/// One percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// Percentile, e.g. 99.9.
    pub p: f64,
    /// Value, µs.
    pub us: u64,
}

/// One histogram bucket: samples with value ≤ `le_us` and above the previous bucket's bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Upper bound, µs.
    pub le_us: u64,
    /// Samples in the bucket.
    pub count: u64,
}

/// A distribution of durations: summary, percentiles and log-spaced buckets (for CDFs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Samples.
    pub count: u64,
    /// Smallest, µs.
    pub min_us: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub stdev_us: f64,
    /// Largest, µs.
    pub max_us: u64,
    /// p50, p75, p90, p95, p99, p99.9, p99.99.
    pub percentiles: Vec<Percentile>,
    /// Non-empty log-spaced buckets (ratio 1.25), ascending.
    pub buckets: Vec<Bucket>,
}

/// A latency distribution at HdrHistogram's percentile ticks: 5 per halving of the distance to
/// 100% (50, 55, ..., 75, 77.5, ...), each the top of the HDR bucket where that share of the
/// samples was reached, as HdrHistogram's `outputPercentileDistribution` lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spectrum {
    /// Ticks in ascending order; the last is at quantile 1.
    pub rows: Vec<SpectrumRow>,
    /// Samples.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub stdev_us: f64,
    /// Largest, µs.
    pub max_us: u64,
    /// The HDR histogram's bucket count and sub-buckets per bucket (its precision, for the
    /// footer plotters expect).
    pub hdr_buckets: u32,
    /// See `hdr_buckets`.
    pub hdr_sub_buckets: u32,
}

/// One tick of a [`Spectrum`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpectrumRow {
    /// The value at this tick, µs (the top of its HDR bucket).
    pub us: u64,
    /// The quantile the tick stands for, 0 to 1.
    pub quantile: f64,
    /// Samples at or below `us`.
    pub count: u64,
}

impl Distribution {
    /// The value at percentile `p` if it is one of the listed ones.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|x| (x.p - p).abs() < 1e-9)
            .map(|x| x.us)
    }
}

/// Open model: how far sends fell behind their intended times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleLag {
    /// Sends later than `late_threshold_us`.
    pub late_sends: u64,
    /// The lateness that counts, µs.
    pub late_threshold_us: u64,
    /// Lag of every send behind its intended time.
    pub lag: Distribution,
    /// Sends the schedule had due before the end of a `-z` run that never went out (every stream
    /// was busy, or the server stalled): their wait is in no latency figure.
    #[serde(default)]
    pub unsent: u64,
    /// How long before the end the oldest of them was due, µs.
    #[serde(default)]
    pub unsent_oldest_us: u64,
    /// Sends due in the warm-up that had not gone out by its end: dropped there, so that the
    /// measured part starts on its own schedule (in no figure and not in the accounting).
    #[serde(default)]
    pub warmup_dropped: u64,
    /// When the last measured send went, from the start of the measured part, s (what the
    /// rate sent is judged over in a `-n` run, whose duration also holds the wait for its
    /// last responses).
    #[serde(default)]
    pub last_send_s: f64,
}

/// Time per phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// DNS lookup (once per run), µs.
    pub dns_us: u64,
    /// TCP connect, per connection.
    pub tcp_connect: Distribution,
    /// TLS (or QUIC) handshake, per connection; empty for cleartext.
    pub handshake: Distribution,
    /// Of the TLS handshakes over TCP, those that resumed a session from an earlier
    /// connection (absent for cleartext and h3, and from reports made before it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes_resumed: Option<u64>,
    /// h2 and h2c: from the connection preface to the server's SETTINGS, per connection; empty
    /// for other protocols (absent from reports made before it was measured).
    #[serde(default = "super::build::empty_distribution")]
    pub settings: Distribution,
    /// Send start to the first response byte, per request.
    pub ttfb: Distribution,
    /// First response byte to the last, per request.
    pub body: Distribution,
}

/// Responses with one status code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusRow {
    /// HTTP status.
    pub code: u16,
    /// Responses.
    pub count: u64,
}

/// Failures of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRow {
    /// Stable kind name, e.g. "refused", "rst_stream(REFUSED_STREAM)".
    pub kind: String,
    /// Failed requests.
    pub count: u64,
}

/// Bytes on the wire, total and per completed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wire {
    /// All bytes written (TLS framing included).
    pub sent: u64,
    /// All bytes read.
    pub received: u64,
    /// `sent` per succeeded request.
    pub sent_per_request: f64,
    /// `received` per succeeded request.
    pub received_per_request: f64,
    /// Encoded request header bytes.
    pub header_sent: u64,
    /// Encoded response header bytes.
    pub header_received: u64,
    /// Decoded response header bytes (names and values).
    pub header_decoded_received: u64,
    /// Response body bytes.
    pub body_received: u64,
    /// 1 − header_received / header_decoded_received: HPACK/QPACK space savings, as h2load.
    pub header_savings: Option<f64>,
}

/// Connections closed by the server, by cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedByServer {
    /// GOAWAY.
    pub goaway: u64,
    /// Of `goaway`, those whose GOAWAY carried an error code (the server failing, not a limit).
    #[serde(default)]
    pub goaway_error: u64,
    /// `Connection: close`.
    pub connection_close: u64,
    /// FIN (or QUIC close without error).
    pub fin: u64,
    /// Reset or error.
    pub reset: u64,
    /// Sum.
    pub total: u64,
}

/// Requests per connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerConnection {
    /// Fewest.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Most.
    pub max: u64,
}

/// Connection lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    /// Opened during the measured part.
    pub opened: u64,
    /// Attempts that failed.
    pub failed_to_open: u64,
    /// Requests that ended (succeeded or failed) on a connection that had carried one before:
    /// opened + reused = succeeded + failed when nothing was cut off.
    pub reused_requests: u64,
    /// Ended by the server.
    pub closed_by_server: ClosedByServer,
    /// Closed by us (end of run, no keep-alive, or after the server broke the protocol).
    pub closed_locally: u64,
    /// Of `closed_locally`, those closed because the server sent bytes no request asked for
    /// (h1: two responses to one request, stray bytes while idle).
    #[serde(default)]
    pub closed_unasked: u64,
    /// Requests carried per connection.
    pub requests_per_connection: PerConnection,
    /// Why more connections were opened than asked for, when it happened.
    pub diagnosis: Option<String>,
    /// Connections opened before the run and closed at once, not in `opened`: one to check the
    /// target and learn its limits, plus one more for `-p auto` over TLS (ALPN) and one for
    /// `--alt-svc`. A server's own count includes them.
    #[serde(default)]
    pub probes: u64,
}

/// QUIC totals over all connections (h3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quic {
    /// Connections reporting.
    pub connections: u64,
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// UDP payload bytes sent.
    pub udp_bytes_sent: u64,
    /// UDP payload bytes received.
    pub udp_bytes_received: u64,
    /// Packets this client sent that its QUIC stack declared lost. Client to server only: QUIC
    /// loss is detected by the sender, so the server's lost packets are known to the server only
    /// (and to the link's counters under `--net`), never counted here.
    pub packets_lost: u64,
    /// Of `packets_lost`, those whose frames this client sent again (all but lost MTU probes).
    pub retransmits: u64,
    /// Mean of the connections' final smoothed RTTs, µs.
    pub mean_smoothed_rtt_us: u64,
    /// Lowest RTT seen, µs.
    pub min_rtt_us: u64,
    /// Mean final congestion window of this client's sending side, bytes: it paces requests and
    /// uploads, not responses. It stays near the initial window when the client only sends
    /// small requests (the controller does not grow an application-limited window).
    pub mean_cwnd_bytes: u64,
    /// Requests sent as 0-RTT early data that the server accepted.
    pub early_requests: u64,
    /// Requests sent as 0-RTT early data that the server refused: sent again after the
    /// handshake, so not in `early_requests`.
    #[serde(default)]
    pub early_rejected: u64,
    /// Why `--0rtt` sent nothing early, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The emulated link a run went through (`httpvs load --net`), with the relay's counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// `--net` as given: a profile name, netem options for both directions, or `UP | DOWN`.
    pub spec: String,
    /// Seed of the link's random choices (`--net-seed` repeats them).
    pub seed: u64,
    /// MTU of the link, bytes.
    pub mtu: u32,
    /// Client to server.
    pub up: LinkDirection,
    /// Server to client.
    pub down: LinkDirection,
}

/// One direction of an emulated link: its netem options and what the relay did to packets
/// over the whole run (connection set-up and warmup included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkDirection {
    /// The netem options in effect, e.g. "delay 50ms loss 1%" (empty: no impairment).
    pub netem: String,
    /// Packets read from the sending side.
    pub packets_in: u64,
    /// Bytes read from the sending side.
    pub bytes_in: u64,
    /// Packets handed to the receiving side.
    pub packets_out: u64,
    /// Bytes handed to the receiving side.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Extra copies made by `duplicate`.
    pub duplicated: u64,
    /// Packets with one bit flipped by `corrupt`.
    pub corrupted: u64,
    /// Sent ahead of the delayed ones by `reorder`.
    pub reordered: u64,
    /// Dropped because `limit` packets were already held.
    pub queue_drops: u64,
    /// Marked CE instead of dropped (`ecn`).
    pub ecn_marked: u64,
    /// Sent more than 1 ms after their due time: the relay could not keep up.
    pub late: u64,
    /// Refused by the receiving kernel (e.g. a corrupted IP header).
    pub rejected: u64,
    /// Still inside the link when the report was made (0 once it drained).
    pub held: u64,
}

/// One second of the measured part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the measured part began, at the end of this interval.
    pub t_s: f64,
    /// Completed requests per second in this interval.
    pub requests_per_s: f64,
    /// Failures in this interval.
    pub failed: u64,
    /// Median latency in this interval, µs.
    pub p50_us: u64,
    /// 99th percentile latency in this interval, µs.
    pub p99_us: u64,
    /// Connections opened so far.
    pub connections_opened: u64,
}

/// One `--fail-on` rule and how the run fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The rule as written, e.g. "p99>250ms".
    pub rule: String,
    /// The measured value, in the rule's unit (`unit`).
    pub actual: f64,
    /// The unit of `actual` and of the rule's limit: `%`, `ms`, `req/s` or `requests`.
    #[serde(default)]
    pub unit: String,
    /// Whether the run broke the rule (always, when it had no data to judge).
    pub breached: bool,
    /// Nothing to measure: a latency rule with no succeeded request, or a rate with no request
    /// started. Such a rule counts as broken.
    #[serde(default)]
    pub no_data: bool,
}
