//! Clients that cancel requests as a load run does (per-request timeouts, streams in flight at
//! its end) never trip the server's rapid-reset guard, on either HTTP/2 engine.

use httpvs_server::{H2Engine, ServeConfig};
use std::process::Command;

#[test]
fn a_load_run_that_times_requests_out_is_never_cut_off_as_rapid_reset() {
    for engine in [H2Engine::Owned, H2Engine::Hyper] {
        let config = ServeConfig {
            h2_engine: engine,
            ..ServeConfig::loopback_ephemeral()
        };
        let server = httpvs_server::start(config).expect("server starts");
        // A fifth of the requests wait 300 ms and time out at 150 ms: each is reset (CANCEL)
        // while the server has not answered it; the run ends with up to 64 streams in flight.
        // The timeout is long next to a read: with 25 ms, a server thread kept off the CPU that
        // long on a loaded machine read a stream's HEADERS and its reset in one read, the
        // rapid-reset pattern, and CI failed once.
        let url = format!("http://{}/?delay=300ms:20", server.http_addr().unwrap());
        let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
            .args(["load", &url, "-p", "h2c", "-c", "2", "-m", "32", "-t", "1"])
            .args(["-z", "1s", "--timeout", "150ms"])
            .output()
            .expect("httpvs runs");
        let report = String::from_utf8_lossy(&out.stdout);
        let totals = server.shutdown(std::time::Duration::from_secs(1));
        assert_eq!(
            totals.rejected.rapid_reset_cutoffs, 0,
            "{engine:?}: {report}"
        );
        assert!(totals.requests.h2c > 100, "{engine:?}: {totals:?}");
        assert!(
            report.contains("request_timeout"),
            "{engine:?}: no request timed out: {report}"
        );
    }
}

/// A request whose client gave up before its answer (`--timeout` on a `delay=`) is in the
/// server's `requests` only, not its `answers`, on HTTP/3 as on h1 and h2: the client stops
/// the stream (H3_REQUEST_CANCELLED), and the server counts an answer once quinn takes its
/// head. It counted all 40 answered.
#[test]
fn an_h3_request_the_client_gave_up_on_is_not_counted_as_answered() {
    let server = httpvs_server::start(ServeConfig::loopback_ephemeral()).expect("server starts");
    let h3 = server.h3_addr().expect("h3 listener");
    let url = format!("https://127.0.0.1:{}/?delay=500ms", h3.port());
    let out = Command::new(env!("CARGO_BIN_EXE_httpvs"))
        .args(["load", &url, "/?delay=10ms", "-p", "h3", "-k", "-c", "2"])
        .args(["-m", "4", "-n", "40", "--timeout", "200ms"])
        .output()
        .expect("httpvs runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("request_timeout"), "{report}");
    let totals = server.shutdown(std::time::Duration::from_secs(1));
    assert_eq!(totals.requests.h3, 40, "{totals:?}");
    assert_eq!(totals.statuses.s2xx, 20, "{totals:?}\n{report}");
}
