//! The JSON report validates against `docs/schema/load-report.schema.json` and round-trips
//! through serde, with every optional section present (open model, QUIC, `--net`, `--fail-on`).

use httpvs_load::protocol::ProtocolKind;
use httpvs_load::report::{text, thresholds, to_json, LinkDirection, Network, Report};
use httpvs_load::stats::Quiet;
use httpvs_load::{LoadConfig, ProtocolChoice, TlsOptions};
use httpvs_server::{start, ServeConfig};
use httpvs_testkit::schema::{assert_valid, LOAD_REPORT};
use serde_json::Value;
use std::time::Duration;

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
    assert_valid(LOAD_REPORT, &value, "the report");
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
            client_identity: None,
        });
    let mut r = httpvs_load::run(&quic, &mut Quiet).unwrap();
    assert!(r.quic.is_some());
    check(&r);
    // QUIC's losses beside the link's: corrupted packets are lost as surely as dropped ones
    // (42 declared lost beside 46 corrupted and 1 lost read as losses jitter made).
    let mut net = network_section();
    net.up.lost = 1;
    net.up.corrupted = 46;
    r.network = Some(net);
    if let Some(q) = r.quic.as_mut() {
        q.packets_lost = 42;
    }
    assert!(!text::render(&r).contains("QUIC declared"));
    if let Some(n) = r.network.as_mut() {
        n.up.corrupted = 0;
    }
    assert!(text::render(&r).contains("QUIC declared 42 of its packets lost"));
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
