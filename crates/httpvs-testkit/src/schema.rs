//! JSON Schema checks of httpvs's `--json` output against the published schemas in `docs/schema/`.
//!
//! The schemas are draft 2020-12 and checked against the draft's meta-schema before use. Each is
//! compiled with its own file as base URI, so the compare schema's relative `$ref` to
//! `load-report.schema.json` reads the sibling file, as a user's validator would.

use serde_json::Value;
use std::path::PathBuf;

/// The schema of `httpvs load --json`.
pub const LOAD_REPORT: &str = "load-report.schema.json";
/// The schema of `httpvs compare --json`.
pub const COMPARE_RESULTS: &str = "compare-results.schema.json";

/// The path of a schema file in `docs/schema/`.
pub fn path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schema")
        .join(file)
}

/// Reads a schema file, checks it against the 2020-12 meta-schema and compiles it.
pub fn validator(file: &str) -> jsonschema::Validator {
    let path = path(file)
        .canonicalize()
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let schema: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{file}: not draft 2020-12"
    );
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("{file} is not a valid schema: {e} at {}", e.instance_path());
    }
    jsonschema::draft202012::options()
        .with_base_uri(format!("file://{}", path.display()))
        .build(&schema)
        .unwrap_or_else(|e| panic!("{file} does not compile: {e}"))
}

/// Every way `value` breaks the schema in `file`, one line each naming the JSON pointer.
pub fn errors(file: &str, value: &Value) -> Vec<String> {
    validator(file)
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Panics with every error unless `value` validates against the schema in `file`.
pub fn assert_valid(file: &str, value: &Value, what: &str) {
    let errors = errors(file, value);
    assert!(
        errors.is_empty(),
        "{what} breaks {file}:\n  {}",
        errors.join("\n  ")
    );
}
