//! The JSON report validates against `docs/report-schema.json` and round-trips through serde.
//!
//! A small validator for the schema subset the file uses (type, const, enum, required,
//! properties, additionalProperties: false, items, $ref, anyOf) keeps the dev build light.

use httpvs_load::protocol::ProtocolKind;
use httpvs_load::report::{text, thresholds, to_json, LinkDirection, Network, Report};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, TlsOptions};
use httpvs_server::{start, ServeConfig};
use serde_json::Value;
use std::time::Duration;

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report-schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("schema file")).expect("schema JSON")
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        other => panic!("schema uses unknown type {other}"),
    }
}

/// Validates `v` against `s`; errors name the JSON path.
fn validate(root: &Value, s: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return validate(root, &root["$defs"][name], v, path, errors);
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|alt| {
            let mut e = Vec::new();
            validate(root, alt, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{path}: matches no alternative"));
        }
        return;
    }
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => errors.push(format!("{path}: not {t}")),
        Some(Value::Array(ts)) if !ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)) => {
            errors.push(format!("{path}: not any of {ts:?}"))
        }
        _ => {}
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push(format!("{path}: not {c}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{path}: {v} not in {e:?}"));
        }
    }
    if let (Some(obj), Some(props)) = (v.as_object(), s.get("properties")) {
        for req in s["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(req.as_str().unwrap()) {
                errors.push(format!("{path}: missing {req}"));
            }
        }
        for (k, val) in obj {
            match props.get(k) {
                Some(ps) => validate(root, ps, val, &format!("{path}.{k}"), errors),
                None if s["additionalProperties"] == Value::Bool(false) => {
                    errors.push(format!("{path}: unexpected field {k}"))
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            validate(root, items, item, &format!("{path}[{i}]"), errors);
        }
    }
}

/// Equal, with floats equal to 1e-9 relative.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn check(report: &Report) {
    // The text rendering reads the same model; every optional section shows when present.
    let rendered = text::render(report);
    assert!(rendered.contains("started ="));
    assert_eq!(report.quic.is_some(), rendered.contains("\nQUIC "));
    assert_eq!(report.network.is_some(), rendered.contains("\nNetwork "));
    assert_eq!(
        report.latency_uncorrected.is_some(),
        rendered.contains("uncorrected")
    );
    assert_eq!(
        !report.thresholds.is_empty(),
        rendered.contains("--fail-on")
    );
    let json = to_json(report);
    let value: Value = serde_json::from_str(&json).unwrap();
    let schema = schema();
    let mut errors = Vec::new();
    validate(&schema, &schema, &value, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    let back: Report = serde_json::from_str(&json).expect("report deserializes");
    // Floats may differ in their last bit through text; everything else must be identical.
    let again: Value = serde_json::from_str(&to_json(&back)).unwrap();
    assert!(
        same(&value, &again),
        "the report does not round-trip through JSON"
    );
}

#[test]
fn closed_open_and_quic_reports_validate() {
    let s = start(ServeConfig::loopback_ephemeral()).expect("server");
    let http = format!("http://{}/", s.http_addr().unwrap());
    let closed = LoadConfig::new(&http)
        .unwrap()
        .shape(2, 1)
        .threads(1)
        .requests(300);
    let mut r = httpvs_load::run(&closed, &mut Quiet).unwrap();
    r.thresholds = thresholds::evaluate(&thresholds::parse("error-rate>1%,p99>2s").unwrap(), &r);
    assert!(
        r.thresholds.iter().all(|t| !t.breached),
        "{:?}",
        r.thresholds
    );
    check(&r);
    // The optional network section (`load --net`, filled by the CLI) validates and round-trips,
    // and a report without it has no `network` key at all (the field is additive).
    assert!(!to_json(&r).contains("\"network\""));
    r.network = Some(network_section());
    check(&r);

    let open = LoadConfig::new(&http)
        .unwrap()
        .shape(2, 1)
        .threads(1)
        .rate(200.0)
        .duration(Duration::from_millis(1200));
    let r = httpvs_load::run(&open, &mut Quiet).unwrap();
    assert!(r.latency_uncorrected.is_some() && r.schedule.is_some());
    assert!(!r.series.is_empty());
    check(&r);

    let h3 = format!("https://127.0.0.1:{}/", s.h3_addr().unwrap().port());
    let quic = LoadConfig::new(&h3)
        .unwrap()
        .protocol(ProtocolChoice::Fixed(ProtocolKind::H3))
        .shape(1, 4)
        .threads(1)
        .requests(200)
        .tls(TlsOptions {
            insecure: true,
            cacert: None,
        });
    let r = httpvs_load::run(&quic, &mut Quiet).unwrap();
    assert!(r.quic.is_some());
    check(&r);
}

/// A network section as `httpvs load --net "delay 5ms loss 1%"` fills it.
fn network_section() -> Network {
    let direction = |lost| LinkDirection {
        netem: "delay 5ms loss 1%".into(),
        packets_in: 1_000,
        bytes_in: 120_000,
        packets_out: 1_000 - lost,
        bytes_out: 120_000 - 120 * lost,
        lost,
        duplicated: 0,
        corrupted: 0,
        reordered: 0,
        queue_drops: 0,
        ecn_marked: 0,
        late: 0,
        rejected: 0,
        held: 0,
    };
    Network {
        spec: "delay 5ms loss 1%".into(),
        seed: 42,
        mtu: 1500,
        up: direction(9),
        down: direction(11),
    }
}
