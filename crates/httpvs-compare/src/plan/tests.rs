//! Plan parsing tests: the shipped plans parse, and each kind of mistake names its field.

use super::*;

#[test]
fn default_plan_parses_and_covers_the_issue_matrix() {
    let plan = Plan::default_plan();
    assert_eq!(plan.protocols, Variant::ALL.to_vec());
    assert_eq!(plan.baseline(), Variant::H1);
    // Without h1, h1-tls (HTTP/1.1 still), as the README says; else the first protocol.
    let tls = Plan::parse(
        &MINIMAL.replace("[\"h1\", \"h2c\"]", "[\"h2c\", \"h1-tls\"]"),
        "p.toml",
    )
    .unwrap();
    assert_eq!(tls.baseline(), Variant::H1Tls);
    let neither = Plan::parse(
        &MINIMAL.replace("[\"h1\", \"h2c\"]", "[\"h2\", \"h2c\"]"),
        "p.toml",
    )
    .unwrap();
    assert_eq!(neither.baseline(), Variant::H2);
    assert!(plan.payloads.len() >= 2);
    let names: Vec<&str> = plan.conditions.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["clean", "wan", "lossy", "severe"]);
    assert!(plan.conditions[0].is_clean());
    assert_eq!(plan.repeats, 3);
}

#[test]
fn every_shipped_plan_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Plan::load(&path).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

fn error_of(text: &str) -> String {
    Plan::parse(text, "p.toml").unwrap_err().to_string()
}

const MINIMAL: &str = "protocols = [\"h1\", \"h2c\"]\nduration = \"1s\"\n\
[[payloads]]\nname = \"small\"\n[[conditions]]\nname = \"clean\"\n";

#[test]
fn minimal_plan_parses_with_defaults() {
    let plan = Plan::parse(MINIMAL, "p.toml").unwrap();
    assert_eq!(plan.repeats, 3);
    assert_eq!(
        plan.shapes_for(Variant::H2c).to_vec(),
        vec![default_shape(Variant::H2c)]
    );
    assert_eq!(plan.payloads[0].path_and_query(), "/");
}

/// A protocol the plan gives no shape takes the one it gives the same protocol on the other
/// transport: a plan's `h1 = "32"` ran h1-tls at the default 64 when aimed at an https server.
#[test]
fn a_protocol_without_a_shape_takes_its_siblings() {
    let text = MINIMAL.replace(
        "[[payloads]]",
        "[shapes]\nh1 = \"32\"\nh2 = \"2x8\"\n[[payloads]]",
    );
    let plan = Plan::parse(&text, "p.toml").unwrap();
    let connections = |v| plan.shapes_for(v)[0].connections;
    assert_eq!(connections(Variant::H1Tls), 32);
    assert_eq!(connections(Variant::H1Close), 32);
    assert_eq!(plan.shapes_for(Variant::H2c)[0].streams, 8);
    assert_eq!(
        plan.shapes_for(Variant::H3),
        vec![default_shape(Variant::H3)]
    );
}

#[test]
fn bad_values_name_their_field_and_line() {
    let e = error_of(&MINIMAL.replace("\"h2c\"", "\"spdy\""));
    assert!(
        e.starts_with("p.toml:1: protocols: 'spdy' is not a protocol"),
        "{e}"
    );
    let e = error_of(&format!("{MINIMAL}netem = 3\n"));
    assert!(e.starts_with("p.toml:7: conditions[0].netem:"), "{e}");
    let e = error_of(&MINIMAL.replace("\"1s\"", "\"soon\""));
    assert!(e.contains("duration: 'soon' is not a duration"), "{e}");
    // Hours are a unit; past a day is said as such (both read "is not a duration").
    let e = error_of(&MINIMAL.replace("\"1s\"", "\"25h\""));
    assert!(e.contains("duration: '25h' is over a day"), "{e}");
    assert_eq!("2h".parse::<Span>().map(|s| s.0.as_secs()), Ok(7200));
    let e = error_of(&format!("{MINIMAL}[shapes]\nh2c = \"4y32\"\n"));
    assert!(e.contains(":8: shapes.h2c: '4y32' is not a shape"), "{e}");
    // Load's cap on requests in flight, said before the run (it ran the matrix, then said
    // "did not run" under the row).
    let e = error_of(&format!("{MINIMAL}[shapes]\nh2c = \"200x10000\"\n"));
    assert!(
        e.contains("shapes.h2c: '200x10000' has 2000000 requests in flight; at most 1000000"),
        "{e}"
    );
    assert!("100x10000".parse::<Shape>().is_ok());
    let e = error_of(&MINIMAL.replace("name = \"small\"", "name = \"small\"\nsize = \"1q\""));
    assert!(e.contains("payloads[0].size: '1q' is not a size"), "{e}");
    assert!(!e.contains('\n'));
}

/// Zeros that would start no server (or one that takes no stream) are plan errors, named by
/// field, not a failure once the run starts; so is a condition with no name.
#[test]
fn zero_server_settings_and_empty_names_are_refused() {
    let e = error_of(&format!("{MINIMAL}[server]\nthreads = 0\n"));
    assert!(e.contains("server.threads: must be at least 1"), "{e}");
    let e = error_of(&format!("{MINIMAL}[server]\nmax_streams = 0\n"));
    assert!(e.contains("server.max_streams: must be at least 1"), "{e}");
    let e = error_of(&MINIMAL.replace("name = \"clean\"", "name = \"\""));
    assert!(e.contains("conditions[0].name: is empty"), "{e}");
}

/// What only failed once the cells ran (every cell "did not run", exit 1) is a plan error:
/// thread counts past 4096 (the cells named `--threads`, a flag the user never gave), a path
/// no URL can hold, a size over the embedded server's limit (each answered 400).
#[test]
fn values_no_cell_could_run_are_plan_errors() {
    let e = error_of(&format!("{MINIMAL}[server]\nthreads = 99999\n"));
    assert!(e.contains("server.threads: 99999 is more than 4096"), "{e}");
    let e = error_of(&format!("{MINIMAL}[client]\nthreads = 99999\n"));
    assert!(e.contains("client.threads: 99999 is more than 4096"), "{e}");
    let e = error_of(&MINIMAL.replace("name = \"small\"", "name = \"small\"\npath = \"/a b\""));
    assert!(
        e.contains("payloads[0].path: '/a b' is not a URL path"),
        "{e}"
    );
    let e = error_of(&MINIMAL.replace("name = \"small\"", "name = \"small\"\nsize = \"99g\""));
    assert!(
        e.contains("payloads[0].size:") && e.contains("limit of 16g"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // A body no cell could make (16g aborted the run), a header the engine cannot send, a
    // zero timeout, a condition that runs no payload, a shape listed twice.
    let e = error_of(&MINIMAL.replace("name = \"small\"", "name = \"small\"\nbody = \"16g\""));
    assert!(
        e.contains("payloads[0].body:") && e.contains("over 256m"),
        "{e}"
    );
    let e = error_of(&MINIMAL.replace(
        "name = \"small\"",
        "name = \"small\"\nheaders = [\"Bad Name: v\"]",
    ));
    assert!(e.contains("payloads[0].headers: 'Bad Name: v'"), "{e}");
    let e = error_of(&format!("{MINIMAL}[client]\ntimeout = \"0s\"\n"));
    assert!(e.contains("client.timeout: must be more than 0"), "{e}");
    let e = error_of(&MINIMAL.replace("name = \"clean\"", "name = \"clean\"\npayloads = []"));
    assert!(
        e.contains("conditions[0].payloads: names no payload"),
        "{e}"
    );
    let e = error_of(&format!("{MINIMAL}[shapes]\nh1 = \"8, 8\"\n"));
    assert!(e.contains("shapes.h1: lists 8 twice"), "{e}");
}

/// A name with a control or direction-override character would rewrite the terminal's tables
/// (ESC) or reverse them (U+202E); names that differ only in spaces read the same.
#[test]
fn unprintable_and_look_alike_names_are_refused() {
    for bad in ["\\u001b[2J", "\\u0007", "a\\u202Eb"] {
        let e = error_of(&MINIMAL.replace("name = \"clean\"", &format!("name = \"{bad}\"")));
        assert!(
            e.contains("conditions[0].name: holds the control character U+"),
            "{e}"
        );
    }
    let e = error_of(&format!("{MINIMAL}[[conditions]]\nname = \" clean\"\n"));
    assert!(e.contains("conditions: name 'clean' is used twice"), "{e}");
}

/// A wrong type is said in a plan's words: serde named its untagged enums ("data did not
/// match any variant of untagged enum ShapeListText") and u32's range for repeats.
#[test]
fn wrong_types_are_said_in_plain_words() {
    let e = error_of(&format!("{MINIMAL}[shapes]\nh1 = true\n"));
    assert!(
        e.contains("shapes.h1: expected a shape (64 or \"4x32\")"),
        "{e}"
    );
    let e = error_of(&MINIMAL.replace("name = \"small\"", "name = \"small\"\nsize = 1.5"));
    assert!(
        e.contains("payloads[0].size: expected a size in bytes"),
        "{e}"
    );
    let e = error_of(&MINIMAL.replace("duration", "repeats = -1\nduration"));
    assert!(
        e.contains("repeats: invalid value: integer `-1`, must be 1..=100"),
        "{e}"
    );
    assert!(!e.contains("untagged") && !e.contains("0 or more"), "{e}");
}

#[test]
fn unknown_and_missing_fields_are_named() {
    let e = error_of(&format!("repeets = 2\n{MINIMAL}"));
    assert!(e.contains("repeets") && e.contains("unknown field"), "{e}");
    let e = error_of(&MINIMAL.replace("duration = \"1s\"\n", ""));
    assert!(e.contains("duration"), "{e}");
}

#[test]
fn cross_field_mistakes_are_named() {
    let e = error_of(&format!("baseline = \"h3\"\n{MINIMAL}"));
    assert_eq!(e, "p.toml:1: baseline: 'h3' is not among protocols");
    let e = error_of(&format!("{MINIMAL}payloads = [\"huge\"]\n"));
    assert!(
        e.contains("conditions[0].payloads: 'huge' is not a payload"),
        "{e}"
    );
    let e = error_of(&format!("{MINIMAL}netem = \"delay 20ms loss lots\"\n"));
    assert!(e.starts_with("p.toml:7: conditions[0].netem: "), "{e}");
    let e = error_of(&format!("{MINIMAL}netem = \"delay 5ms | delay 10ms\"\n"));
    assert!(e.starts_with("p.toml:7: conditions[0].netem: "), "{e}");
    assert!(
        e.contains("up = \"...\"") && e.contains("down = \"...\""),
        "{e}"
    );
    let e = error_of(&MINIMAL.replace("duration", "repeats = 0\nduration"));
    assert_eq!(e, "p.toml:2: repeats: must be 1..=100");
    let e = error_of(&MINIMAL.replace("duration", "repeats = 100000000000\nduration"));
    assert_eq!(
        e,
        "p.toml:2: repeats: invalid value: integer `100000000000`, must be 1..=100"
    );
    let e = error_of(&MINIMAL.replace("duration", "repeats = -1\nduration"));
    assert_eq!(
        e,
        "p.toml:2: repeats: invalid value: integer `-1`, must be 1..=100"
    );
}

#[test]
fn quick_keeps_one_short_repeat_of_the_first_payload() {
    let plan = Plan::default_plan().quick();
    assert_eq!(plan.repeats, 1);
    assert_eq!(plan.payloads.len(), 1);
    assert!(plan.duration.0 <= std::time::Duration::from_millis(600));
}

#[test]
fn missing_keys_are_named_together_without_a_line() {
    let e = error_of("name = \"x\"\nprotocols = [\"h1\"]\n");
    assert_eq!(
        e,
        "p.toml: missing payloads, conditions, duration (a plan needs protocols, payloads, \
         conditions, duration; `httpvs compare --print-plan > plan.toml` writes the default one \
         to start from)"
    );
}

/// Two spellings of one protocol in `[shapes]` are refused, as in `protocols`: the later key
/// silently replaced the earlier (`h1 = "8"` then `http1 = "64"` ran h1 at 64 only).
#[test]
fn a_protocol_shaped_twice_under_two_names_is_refused() {
    let e = error_of(&format!("{MINIMAL}[shapes]\nh1 = \"8\"\nhttp1 = \"64\"\n"));
    assert!(
        e.starts_with("p.toml:9: shapes.http1: names h1 again (as shapes.h1)"),
        "{e}"
    );
}

/// A condition name `--conditions` could never pick (a comma, spaces at its ends) is refused.
#[test]
fn a_condition_name_the_flag_cannot_pick_is_refused() {
    for name in ["a,b", " c"] {
        let text = MINIMAL.replace("name = \"clean\"", &format!("name = {name:?}"));
        let e = error_of(&text);
        assert!(e.contains("which --conditions cannot name"), "{e}");
    }
}

/// A whole number too large for its field says so (it read "expected a whole number, 0 or
/// more" of 99999999999).
#[test]
fn a_number_too_large_for_its_field_says_so() {
    let e = error_of(&format!("{MINIMAL}[server]\nmax_streams = 99999999999\n"));
    assert!(e.ends_with("too large (at most 4294967295)"), "{e}");
}

/// A plan without a name is named by its file's stem; `--plan <(cat p.toml)` reads
/// `/dev/fd/63`, not a file, and was named "63".
#[test]
fn an_unnamed_plan_is_named_by_its_file_or_else_plan() {
    let dir = std::env::temp_dir().join(format!("httpvs-plan-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lan.toml");
    std::fs::write(&file, MINIMAL).unwrap();
    assert_eq!(Plan::load(&file).unwrap().name, "lan");
    assert_eq!(name_from_path(Path::new("/dev/null")), "plan");
    std::fs::remove_dir_all(&dir).unwrap();
}
