//! The plan: which protocols, shapes, payloads and network conditions a comparison runs, read from TOML.
//!
//! The default matrix is itself a plan (`plans/default.toml`, embedded here and printed by
//! `httpvs compare --print-plan`). Values are checked while parsing, so a bad one is reported
//! with its line and field; cross-field checks run in [`Plan::validate`].

mod error;
pub mod units;

pub use error::PlanError;
pub use units::{ByteSize, Shape, Span};

use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

/// The default matrix shipped with httpvs.
pub const DEFAULT_PLAN: &str = include_str!("../../../../plans/default.toml");

/// The keys a plan file must set; the others have defaults.
const REQUIRED_KEYS: [&str; 4] = ["protocols", "payloads", "conditions", "duration"];

/// A whole comparison: the matrix and how long each cell runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Short name shown in reports (a plan file without one is named by its file stem).
    #[serde(default)]
    pub name: String,
    /// What the plan shows, one or two sentences.
    #[serde(default)]
    pub description: String,
    /// Protocols, in table order.
    pub protocols: Vec<Variant>,
    /// The protocol ratios are taken against (default: h1 when present, else the first).
    #[serde(default)]
    pub baseline: Option<Variant>,
    /// Client shapes per protocol; several shapes make several rows.
    #[serde(default)]
    pub shapes: BTreeMap<Variant, ShapeList>,
    /// Request/response payloads.
    pub payloads: Vec<Payload>,
    /// Network conditions.
    pub conditions: Vec<Condition>,
    /// Measured period of each repeat.
    pub duration: Span,
    /// Warm-up before each measured period (not counted).
    #[serde(default = "default_warmup")]
    pub warmup: Span,
    /// Repeats per cell; the report gives their median and min–max spread.
    #[serde(default = "default_repeats")]
    pub repeats: u32,
    /// Settings of the embedded server.
    #[serde(default)]
    pub server: ServerSettings,
    /// Settings of the client.
    #[serde(default)]
    pub client: ClientSettings,
}

fn default_warmup() -> Span {
    Span(std::time::Duration::from_millis(500))
}

fn default_repeats() -> u32 {
    3
}

/// One or more shapes, written `"64"` or `"16, 64, 256"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShapeListText", into = "String")]
pub struct ShapeList(pub Vec<Shape>);

#[derive(Deserialize)]
#[serde(untagged)]
enum ShapeListText {
    Number(u32),
    Text(String),
}

impl TryFrom<ShapeListText> for ShapeList {
    type Error = String;
    fn try_from(value: ShapeListText) -> Result<Self, String> {
        let text = match value {
            ShapeListText::Number(n) => n.to_string(),
            ShapeListText::Text(s) => s,
        };
        text.parse()
    }
}

impl FromStr for ShapeList {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let shapes = text
            .split(',')
            .map(str::parse)
            .collect::<Result<Vec<Shape>, String>>()?;
        Ok(ShapeList(shapes))
    }
}

impl From<ShapeList> for String {
    fn from(list: ShapeList) -> String {
        let parts: Vec<String> = list.0.iter().map(Shape::to_string).collect();
        parts.join(", ")
    }
}

/// What is requested and what comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// Short name shown in tables (`small`, `large`).
    pub name: String,
    /// Request path (default `/`; `/echo` returns the request body).
    #[serde(default = "default_path")]
    pub path: String,
    /// Response size asked of the embedded server with `size=` (ignored for user targets).
    #[serde(default)]
    pub size: Option<ByteSize>,
    /// Request method (default GET).
    #[serde(default = "default_method")]
    pub method: String,
    /// Request body size in bytes (generated), if any.
    #[serde(default)]
    pub body: Option<ByteSize>,
    /// Extra request headers, `name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
}

fn default_path() -> String {
    "/".into()
}

fn default_method() -> String {
    "GET".into()
}

impl Payload {
    /// The path and query the embedded server is asked for.
    pub fn path_and_query(&self) -> String {
        match self.size {
            None => self.path.clone(),
            Some(size) => {
                let sep = if self.path.contains('?') { '&' } else { '?' };
                format!("{}{sep}size={}", self.path, size.0)
            }
        }
    }
}

/// A network condition: netem parameters applied to the client's link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Short name shown in tables (`clean`, `wan`, `lossy`).
    pub name: String,
    /// netem parameters for both directions, e.g. `delay 20ms loss 2%`; empty means no emulation.
    #[serde(default)]
    pub netem: String,
    /// netem parameters for the client-to-server direction only (overrides `netem` there).
    #[serde(default)]
    pub up: Option<String>,
    /// netem parameters for the server-to-client direction only (overrides `netem` there).
    #[serde(default)]
    pub down: Option<String>,
    /// Only these payloads run under this condition (default: all).
    #[serde(default)]
    pub payloads: Option<Vec<String>>,
}

impl Condition {
    /// The netem string for the client-to-server direction.
    pub fn up(&self) -> &str {
        self.up.as_deref().unwrap_or(&self.netem).trim()
    }

    /// The netem string for the server-to-client direction.
    pub fn down(&self) -> &str {
        self.down.as_deref().unwrap_or(&self.netem).trim()
    }

    /// Whether no emulation is needed.
    pub fn is_clean(&self) -> bool {
        self.up().is_empty() && self.down().is_empty()
    }

    /// Whether `payload` runs under this condition.
    pub fn runs(&self, payload: &str) -> bool {
        self.payloads
            .as_ref()
            .is_none_or(|list| list.iter().any(|p| p == payload))
    }
}

/// Embedded-server settings (ignored for user targets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Worker threads (default: one per server CPU).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Close connections after this many requests (h1 `Connection: close`, h2/h3 GOAWAY).
    #[serde(default)]
    pub max_requests_per_conn: Option<u64>,
    /// h2 SETTINGS_MAX_CONCURRENT_STREAMS and h3 max bidi streams.
    #[serde(default)]
    pub max_streams: Option<u32>,
}

/// Client settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// Worker threads (default: one per client CPU).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Per-request timeout.
    #[serde(default)]
    pub timeout: Option<Span>,
}

/// The largest generated request body a payload may ask for (as `load --data-file`'s limit).
const MAX_BODY: u64 = 256 << 20;

/// The best-practice shape when a plan names none: many connections for h1, few x many for h2/h3,
/// with the same 64 requests in flight either way (so a delay-bound ratio is not the shapes').
pub fn default_shape(variant: Variant) -> Shape {
    if variant.multiplexed() {
        Shape {
            connections: 4,
            streams: 16,
        }
    } else {
        Shape {
            connections: 64,
            streams: 1,
        }
    }
}

/// A plan file's stem, or `plan` for one that is not a file: `--plan <(...)` reads
/// `/dev/fd/63`, whose stem names nothing.
fn name_from_path(path: &Path) -> String {
    match path.file_stem() {
        Some(stem) if std::fs::metadata(path).is_ok_and(|m| m.is_file()) => {
            stem.to_string_lossy().into_owned()
        }
        _ => "plan".into(),
    }
}

impl Plan {
    /// The default matrix.
    pub fn default_plan() -> Plan {
        // The embedded plan is checked by a unit test, so failing here is a build defect.
        Plan::parse(DEFAULT_PLAN, "default plan").expect("plans/default.toml is valid")
    }

    /// Reads and checks a plan file.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let origin = path.display().to_string();
        // Bounded: a plan is a page of TOML, and /dev/zero must not fill memory.
        let text = httpvs_load::files::read_text_bounded(path, 16 << 20)
            .map_err(|e| PlanError::field(&origin, "", format!("cannot read this --plan: {e}")))?;
        let mut plan = Plan::parse(&text, &origin)?;
        if plan.name.trim().is_empty() {
            // The reports' title would read "httpvs compare: " with nothing after it.
            plan.name = name_from_path(path);
        }
        Ok(plan)
    }

    /// The plan as a plan file (`--print-plan` after other flags narrowed it).
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| e.to_string())
    }

    /// Parses and checks plan text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Plan, PlanError> {
        // Missing keys all at once, without a line: TOML would name one at a time, pinned to
        // whatever key happens to be on line 1.
        let table = text
            .parse::<toml::Table>()
            .map_err(|e| PlanError::from_toml_syntax(origin, text, &e))?;
        {
            let missing: Vec<&str> = REQUIRED_KEYS
                .iter()
                .copied()
                .filter(|k| !table.contains_key(*k))
                .collect();
            if !missing.is_empty() {
                return Err(PlanError::field(
                    origin,
                    "",
                    format!(
                        "missing {} (a plan needs {}; `httpvs compare --print-plan > plan.toml` writes the default one to start from)",
                        missing.join(", "),
                        REQUIRED_KEYS.join(", ")
                    ),
                ));
            }
        }
        // Two spellings of one protocol (`h1` and `http1`) would fold into one key, the later
        // silently dropping the earlier, as `protocols` refuses a protocol listed twice.
        if let Some(shapes) = table.get("shapes").and_then(|s| s.as_table()) {
            let mut seen: Vec<(Variant, &str)> = Vec::new();
            for key in shapes.keys() {
                let Ok(variant) = key.parse::<Variant>() else {
                    continue;
                };
                if let Some((_, first)) = seen.iter().find(|(v, _)| *v == variant) {
                    let e = PlanError::field(
                        origin,
                        format!("shapes.{key}"),
                        format!("names {variant} again (as shapes.{first}); give its shapes once"),
                    );
                    return Err(e.located(text));
                }
                seen.push((variant, key));
            }
        }
        let plan: Plan =
            toml::from_str(text).map_err(|e| PlanError::from_toml(origin, text, &e))?;
        plan.validate(origin).map_err(|e| e.located(text))?;
        Ok(plan)
    }

    /// Cross-field checks that parsing alone cannot make.
    pub fn validate(&self, origin: &str) -> Result<(), PlanError> {
        let err = |field: String, msg: String| Err(PlanError::field(origin, field, msg));
        // Names and titles go to the terminal and the HTML as they are: a control or
        // direction-override character would rewrite what the tables show.
        let texts = [
            ("name".to_string(), &self.name),
            ("description".to_string(), &self.description),
        ]
        .into_iter()
        .chain(
            self.payloads
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("payloads[{i}].name"), &p.name)),
        )
        .chain(
            self.conditions
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("conditions[{i}].name"), &c.name)),
        );
        for (field, text) in texts {
            if let Some(c) = text.chars().find(|&c| unprintable(c)) {
                return err(
                    field,
                    format!(
                        "holds the control character U+{:04X}: names are shown as they are",
                        c as u32
                    ),
                );
            }
        }
        if self.protocols.is_empty() {
            return err("protocols".into(), "names no protocol".into());
        }
        if let Some(dup) = first_duplicate(self.protocols.iter().map(|v| v.name())) {
            return err("protocols".into(), format!("'{dup}' is listed twice"));
        }
        if let Some(b) = self.baseline {
            if !self.protocols.contains(&b) {
                return err("baseline".into(), format!("'{b}' is not among protocols"));
            }
        }
        for (v, list) in &self.shapes {
            if list.0.is_empty() {
                return err(format!("shapes.{v}"), "names no shape".into());
            }
            // Two rows with one label: verdicts like "h1@8 0.89x h1@8".
            let names: Vec<String> = list.0.iter().map(Shape::to_string).collect();
            if let Some(dup) = first_duplicate(names.iter().map(String::as_str)) {
                return err(format!("shapes.{v}"), format!("lists {dup} twice"));
            }
        }
        if self.payloads.is_empty() {
            return err("payloads".into(), "names no payload".into());
        }
        if let Some(dup) = first_duplicate(self.payloads.iter().map(|p| p.name.trim())) {
            return err("payloads".into(), format!("name '{dup}' is used twice"));
        }
        for (i, p) in self.payloads.iter().enumerate() {
            self.validate_payload(origin, i, p)?;
        }
        if self.conditions.is_empty() {
            return err("conditions".into(), "names no condition".into());
        }
        // Trimmed: "c" and " c" read the same in a table.
        if let Some(dup) = first_duplicate(self.conditions.iter().map(|c| c.name.trim())) {
            return err("conditions".into(), format!("name '{dup}' is used twice"));
        }
        for (i, c) in self.conditions.iter().enumerate() {
            let directions = [
                ("netem", Some(&c.netem)),
                ("up", c.up.as_ref()),
                ("down", c.down.as_ref()),
            ];
            for (key, text) in directions {
                let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
                    continue;
                };
                if let Err(e) = httpvs_netem::Impairment::parse(text) {
                    let mut msg = e.to_string();
                    if text.contains('|') {
                        // `load --net` takes "UP | DOWN"; a plan names the directions.
                        msg.push_str(
                            " (a plan gives the two directions apart: up = \"...\" for client to \
                             server, down = \"...\" for server to client)",
                        );
                    }
                    return err(format!("conditions[{i}].{key}"), msg);
                }
            }
            if c.payloads.as_ref().is_some_and(Vec::is_empty) {
                // Nothing would run under it, and nothing would say so.
                let msg = "names no payload (leave it out for all of them)".to_string();
                return err(format!("conditions[{i}].payloads"), msg);
            }
            for name in c.payloads.iter().flatten() {
                if !self.payloads.iter().any(|p| &p.name == name) {
                    let msg = format!("'{name}' is not a payload of this plan");
                    return err(format!("conditions[{i}].payloads"), msg);
                }
            }
        }
        // Zero would start no server, or a server that takes no stream: each row would then
        // "not run", past the point where a bad plan is one line.
        if self.server.threads == Some(0) {
            return err("server.threads".into(), "must be at least 1".into());
        }
        if self.server.max_streams == Some(0) {
            return err("server.max_streams".into(), "must be at least 1".into());
        }
        if self.server.max_requests_per_conn == Some(0) {
            return err(
                "server.max_requests_per_conn".into(),
                "must be at least 1".into(),
            );
        }
        if self.client.threads == Some(0) {
            return err("client.threads".into(), "must be at least 1".into());
        }
        if self.client.timeout.is_some_and(|t| t.0.is_zero()) {
            // Every request would time out at once, and every cell "not run".
            return err(
                "client.timeout".into(),
                "must be more than 0 (leave it out for load's default, 20s)".into(),
            );
        }
        for (field, threads, max) in [
            (
                "server.threads",
                self.server.threads,
                httpvs_server::MAX_THREADS,
            ),
            (
                "client.threads",
                self.client.threads,
                httpvs_load::config::MAX_THREADS,
            ),
        ] {
            if let Some(n) = threads.filter(|&n| n > max) {
                return err(field.into(), format!("{n} is more than {max}"));
            }
        }
        if let Some((i, _)) = self
            .conditions
            .iter()
            .enumerate()
            .find(|(_, c)| c.name.trim().is_empty())
        {
            return err(format!("conditions[{i}].name"), "is empty".into());
        }
        // `--conditions` splits on commas and trims: such a name could never be picked.
        if let Some((i, c)) = self
            .conditions
            .iter()
            .enumerate()
            .find(|(_, c)| c.name.contains(',') || c.name.trim() != c.name)
        {
            return err(
                format!("conditions[{i}].name"),
                format!(
                    "{:?} has a comma or spaces at its ends, which --conditions cannot name",
                    c.name
                ),
            );
        }
        if !(1..=100).contains(&self.repeats) {
            return err("repeats".into(), "must be 1..=100".into());
        }
        if self.duration.0.is_zero() {
            return err("duration".into(), "must be more than 0".into());
        }
        Ok(())
    }

    fn validate_payload(&self, origin: &str, i: usize, p: &Payload) -> Result<(), PlanError> {
        let field = |name: &str| format!("payloads[{i}].{name}");
        if p.name.trim().is_empty() {
            return Err(PlanError::field(origin, field("name"), "is empty"));
        }
        if !p.path.starts_with('/') {
            return Err(PlanError::field(origin, field("path"), "must start with /"));
        }
        if let Err(e) = p.path.parse::<http::uri::PathAndQuery>() {
            // A space or a control character: every cell would fail to build its URL.
            let msg = format!(
                "'{}' is not a URL path: {e} (escape it, as %20 for a space)",
                p.path
            );
            return Err(PlanError::field(origin, field("path"), msg));
        }
        if let Some(size) = p.size.filter(|s| s.0 > httpvs_server::query::MAX_SIZE) {
            // The embedded server answers 400 past its limit: no cell could run.
            let msg = format!(
                "{} bytes is over the embedded server's limit of 16g",
                size.0
            );
            return Err(PlanError::field(origin, field("size"), msg));
        }
        if http_method_invalid(&p.method) {
            let msg = format!("'{}' is not an HTTP method", p.method);
            return Err(PlanError::field(origin, field("method"), msg));
        }
        if let Some(body) = p.body.filter(|b| b.0 > MAX_BODY) {
            // Each cell makes the body whole: 16g aborted the run on the first cell.
            let msg = format!(
                "{} bytes is over 256m, the most a request body may be (as load's --data-file)",
                body.0
            );
            return Err(PlanError::field(origin, field("body"), msg));
        }
        for h in &p.headers {
            // As the load engine will parse it: a space in a name failed every cell.
            let ok = h.split_once(':').is_some_and(|(n, v)| {
                http::HeaderName::from_bytes(n.trim().as_bytes()).is_ok()
                    && http::HeaderValue::from_str(v.trim()).is_ok()
            });
            if !ok {
                let msg = format!("'{h}' is not 'name: value' with a valid name and value");
                return Err(PlanError::field(origin, field("headers"), msg));
            }
        }
        Ok(())
    }

    /// The baseline protocol: the plan's, else h1 when present, else h1-tls (the same
    /// HTTP/1.1, as the README has it), else the first protocol.
    pub fn baseline(&self) -> Variant {
        self.baseline.unwrap_or_else(|| {
            [Variant::H1, Variant::H1Tls]
                .into_iter()
                .find(|v| self.protocols.contains(v))
                .unwrap_or(self.protocols[0])
        })
    }

    /// The shapes a protocol runs at: the plan's; else those it gives the same protocol on
    /// the other transport (h1-tls takes h1's, h2 takes h2c's, and back; h1-close takes
    /// h1's), so a plan written for `h1` keeps its shape when `--protocols` or an https
    /// target turns it into `h1-tls`; else the best-practice default.
    pub fn shapes_for(&self, variant: Variant) -> Vec<Shape> {
        let siblings: &[Variant] = match variant {
            Variant::H1 => &[Variant::H1Tls],
            Variant::H1Tls => &[Variant::H1],
            Variant::H1Close => &[Variant::H1, Variant::H1Tls],
            Variant::H2c => &[Variant::H2],
            Variant::H2 => &[Variant::H2c],
            Variant::H3 => &[],
        };
        std::iter::once(&variant)
            .chain(siblings)
            .find_map(|v| self.shapes.get(v))
            .map_or_else(|| vec![default_shape(variant)], |l| l.0.clone())
    }

    /// The `--quick` variant: one repeat, short periods, the first payload only.
    pub fn quick(mut self) -> Plan {
        self.repeats = 1;
        let cap = |s: Span, ms: u64| Span(s.0.min(std::time::Duration::from_millis(ms)));
        self.duration = cap(self.duration, 600);
        self.warmup = cap(self.warmup, 250);
        // Every condition runs the one payload left, even one that named only others.
        self.payloads.truncate(1);
        for c in &mut self.conditions {
            c.payloads = None;
        }
        for list in self.shapes.values_mut() {
            list.0.truncate(1);
        }
        self
    }
}

/// The sentence for a plan that runs other than its file says (narrowed by flags, or on a
/// user's URL): `protocols; payloads; on conditions{note}.`
pub fn run_sentence(
    protocols: &str,
    payloads: &str,
    conditions: &[Condition],
    note: &str,
) -> String {
    let conditions: Vec<&str> = conditions.iter().map(|c| c.name.as_str()).collect();
    format!(
        "{protocols}; {payloads}; on {}{note}.",
        conditions.join(", ")
    )
}

/// A character that must not reach a terminal or a page from a plan: C0/C1 controls (ESC,
/// BEL) and the bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069).
fn unprintable(c: char) -> bool {
    c.is_control()
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::BTreeSet::new();
    names.into_iter().find(|n| !seen.insert(*n))
}

fn http_method_invalid(method: &str) -> bool {
    method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase())
}

/// The baseline to use when the plan's does not run (skipped for the target): h1-tls for h1
/// when it runs, else the first protocol that does; `None` when the plan's runs.
pub fn baseline_fallback(baseline: Variant, running: &[Variant]) -> Option<Variant> {
    if running.contains(&baseline) || running.is_empty() {
        return None;
    }
    if baseline == Variant::H1 && running.contains(&Variant::H1Tls) {
        return Some(Variant::H1Tls);
    }
    Some(running[0])
}

#[cfg(test)]
mod tests;
