//! Plan errors: one line that names the file, the line and the field, e.g. `plan.toml:7: conditions[1].netem: ...`.

use std::fmt;

/// A plan that could not be read or does not make sense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// Where the plan came from (a path, or `default plan`).
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, for syntax errors (`plan.toml:2:14: not valid TOML: ...`).
    pub column: Option<usize>,
    /// The field, as a path: `conditions[1].netem`, `repeats`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message.replace('\n', " "))
    }
}

impl std::error::Error for PlanError {}

impl PlanError {
    /// An error about a field found after parsing (no line known).
    pub fn field(origin: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        PlanError {
            origin: origin.to_string(),
            line: None,
            column: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error with the line of the plan `text` that sets its field, when it had none
    /// (a check made after parsing, as of a netem string): `bad.toml:8: conditions[0].netem: ...`.
    pub fn located(mut self, text: &str) -> Self {
        if self.line.is_none() && !self.field.is_empty() {
            let lines = text.lines().count();
            self.line = (1..=lines).find(|&n| field_at(text, n) == self.field);
        }
        self
    }

    /// Turns a TOML syntax error (text that is not TOML at all) into one line with the
    /// position and no field: the key on that line is often not the one at fault (a missing
    /// `,` in an array shows on the next key's line).
    pub fn from_toml_syntax(origin: &str, text: &str, err: &toml::de::Error) -> Self {
        let message = format!("not valid TOML: {}", err.message().trim());
        let Some(span) = err.span() else {
            return PlanError::field(origin, "", message);
        };
        let offset = span.start.min(text.len());
        let line = text[..offset].matches('\n').count() + 1;
        let column = text[..offset]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
            + 1;
        PlanError {
            origin: origin.to_string(),
            line: Some(line),
            column: Some(column),
            field: String::new(),
            message,
        }
    }

    /// Turns a TOML error into one line that names the field under its span.
    pub fn from_toml(origin: &str, text: &str, err: &toml::de::Error) -> Self {
        let message = plain_type_names(err.message().trim());
        let Some(span) = err.span() else {
            return PlanError::field(origin, "", message);
        };
        let offset = span.start.min(text.len());
        let line = text[..offset].matches('\n').count() + 1;
        let field = field_at(text, line);
        // The type's range is not the plan's: repeats is 1..=100 (it said "0 or more").
        let message = match field.as_str() {
            "repeats" => message
                .replace("expected a whole number, 0 or more", "must be 1..=100")
                .replace("too large (at most 4294967295)", "must be 1..=100"),
            _ => message,
        };
        PlanError {
            origin: origin.to_string(),
            line: Some(line),
            column: None,
            field,
            message,
        }
    }
}

/// serde names Rust's integer types ("invalid value: integer `-1`, expected u32"); a plan's
/// reader knows numbers: "invalid value: integer `-1`, expected a whole number, 0 or more".
fn plain_type_names(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, plain) in [
        ("expected u8", "expected a whole number, 0 to 255"),
        ("expected u16", "expected a whole number, 0 to 65535"),
        ("expected u32", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected f64", "expected a number"),
    ] {
        if let Some(rest) = out.strip_suffix(rust) {
            // A whole number past the type's top is too large, not "0 or more" (99999999999
            // for a u32 read so, as if it were negative).
            let top = match rust {
                "expected u32" => Some(u64::from(u32::MAX)),
                "expected usize" | "expected u64" => Some(u64::MAX),
                _ => None,
            };
            let given = rest
                .strip_prefix("invalid value: integer `")
                .and_then(|r| r.split('`').next())
                .and_then(|n| n.parse::<i128>().ok());
            out = match (top, given) {
                (Some(top), Some(n)) if n > i128::from(top) => {
                    format!("{rest}too large (at most {top})")
                }
                _ => format!("{rest}{plain}"),
            };
        }
    }
    // Untagged enums say only that nothing matched, by their Rust names.
    for (rust, plain) in [
        (
            "data did not match any variant of untagged enum ShapeListText",
            "expected a shape (64 or \"4x32\") or a list of them (\"8, 64\")",
        ),
        (
            "data did not match any variant of untagged enum ShapeText",
            "expected a shape (64 or \"4x32\")",
        ),
        (
            "data did not match any variant of untagged enum SizeOrNumber",
            "expected a size in bytes (100, or \"64k\", \"1m\")",
        ),
    ] {
        if out.contains(rust) {
            out = out.replace(rust, plain);
        }
    }
    out
}

/// The dotted path of the key set on `line` (1-based): its `[table]` or `[[array]]` header plus its key.
fn field_at(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line - 1).map_or("", |l| l.trim());
    let key = if here.starts_with('[') {
        String::new()
    } else {
        here.split_once('=')
            .map_or("", |(k, _)| k.trim())
            .trim_matches('"')
            .to_string()
    };
    // The name of an array-of-tables header (`[[ payloads ]]` is `payloads`, as TOML reads it).
    let array_name = |l: &str| -> Option<String> {
        let inner = l.trim().strip_prefix("[[")?.split("]]").next()?;
        Some(inner.trim().to_string())
    };
    let mut section = String::new();
    for (i, l) in lines.iter().enumerate().take(line).rev() {
        let l = l.trim();
        if let Some(name) = array_name(l) {
            // Counted as TOML does, spaces inside the brackets or not (counted only as written
            // `[[name]]`, a `[[ payloads ]]` read as index -1, 18446744073709551615).
            let index = lines[..=i]
                .iter()
                .filter(|x| array_name(x).as_deref() == Some(name.as_str()))
                .count()
                .saturating_sub(1);
            section = format!("{name}[{index}]");
            break;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
            section = name.trim().to_string();
            break;
        }
    }
    match (section.is_empty(), key.is_empty()) {
        (true, _) => key,
        (false, true) => section,
        (false, false) => format!("{section}.{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keys_inside_arrays_of_tables() {
        let text =
            "repeats = 1\n[[conditions]]\nname = \"a\"\n[[conditions]]\nname = \"b\"\nnetem = 3\n";
        assert_eq!(field_at(text, 6), "conditions[1].netem");
        assert_eq!(field_at(text, 1), "repeats");
        let text = "[server]\nthreads = \"x\"\n";
        assert_eq!(field_at(text, 2), "server.threads");
        // Spaces inside the brackets are the same table (it read payloads[18446744073709551615]).
        let text = "[[ payloads ]]\nname = \"a\"\n[[payloads]]\nsizee = 5\n";
        assert_eq!(field_at(text, 2), "payloads[0].name");
        assert_eq!(field_at(text, 4), "payloads[1].sizee");
    }

    /// A syntax error names its line and column, not the key on that line: a missing comma
    /// in `protocols` shows on the next line, whose key (`duration`) is not at fault.
    #[test]
    fn a_syntax_error_names_a_position_not_a_field() {
        let text = "protocols = [\"h1\"\nduration = \"1s\"\n";
        let err = text.parse::<toml::Table>().unwrap_err();
        let e = PlanError::from_toml_syntax("p.toml", text, &err);
        let line = e.to_string();
        assert!(line.starts_with("p.toml:2:1: not valid TOML: "), "{line}");
        assert!(!line.contains("duration:"), "{line}");
    }

    #[test]
    fn a_field_found_after_parsing_gets_its_line() {
        let text = "repeats = 1\n[[conditions]]\nname = \"a\"\n[[conditions]]\nname = \"b\"\n\
                    netem = \"delay 5ms | delay 10ms\"\n";
        let e = PlanError::field("p.toml", "conditions[1].netem", "bad").located(text);
        assert_eq!(e.to_string(), "p.toml:6: conditions[1].netem: bad");
        // A field no line sets (a default) keeps none.
        let e = PlanError::field("p.toml", "conditions[0].netem", "bad").located(text);
        assert_eq!(e.to_string(), "p.toml: conditions[0].netem: bad");
    }
}
