//! Run options beside the plan: shape overrides (`--shape`), CPU pinning and report file names.

use crate::plan::{Plan, Shape, ShapeList};
use crate::variant::Variant;
use std::collections::BTreeMap;

/// Parses `--shape h2c=8x60,h1=120`; a bare shape after a protocol adds a row: `h1=16,64`.
pub fn parse_shape_overrides(text: &str) -> Result<BTreeMap<Variant, ShapeList>, String> {
    let mut out: BTreeMap<Variant, ShapeList> = BTreeMap::new();
    let mut current: Option<Variant> = None;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let shape_text = match item.split_once('=') {
            Some((proto, shape)) => {
                let v: Variant = proto.parse()?;
                if out.contains_key(&v) {
                    return Err(format!(
                        "{v} is named twice; list its shapes together, e.g. {v}=4x32,8x8"
                    ));
                }
                current = Some(v);
                shape
            }
            None => item,
        };
        let Some(v) = current else {
            return Err(format!(
                "'{item}' names no protocol (write PROTOCOL=SHAPE, e.g. h2c=8x60)"
            ));
        };
        let shape: Shape = shape_text.parse()?;
        let list = &mut out.entry(v).or_insert_with(|| ShapeList(Vec::new())).0;
        if list.contains(&shape) {
            // Two rows of one label could not be told apart in the tables or the verdict.
            return Err(format!("{v}={shape} is listed twice"));
        }
        list.push(shape);
    }
    if out.is_empty() {
        return Err("names no shape (e.g. h2c=8x60,h1=120)".into());
    }
    Ok(out)
}

/// Applies shape overrides to a plan.
pub fn apply_shapes(plan: &mut Plan, overrides: BTreeMap<Variant, ShapeList>) {
    plan.shapes.extend(overrides);
}

/// Parses a CPU list: `0`, `0,2`, `0-3`, `0-1,4`.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{text}' is not a CPU list (e.g. 0, 0-1, 0,2)");
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a > b || b - a > 4096 {
            return Err(bad());
        }
        for cpu in a..=b {
            // In the order given (load and serve hand CPUs out round-robin), each once.
            if !cpus.contains(&cpu) {
                cpus.push(cpu);
            }
        }
    }
    Ok(cpus)
}

/// Where the server and the client run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    /// The server's CPUs (empty: unpinned).
    pub server: Vec<usize>,
    /// The client's CPUs (empty: unpinned).
    pub client: Vec<usize>,
    /// `--no-pin` asked for none (the report then says so, not "fewer than 2 CPUs").
    pub turned_off: bool,
}

impl Pinning {
    /// The default split of `available` CPUs: with two or more, the server gets the first half
    /// (rounded down) and the client the rest; with one, nothing is pinned.
    pub fn split(available: &[usize]) -> Pinning {
        if available.len() < 2 {
            return Pinning::default();
        }
        let half = available.len() / 2;
        Pinning {
            server: available[..half].to_vec(),
            client: available[half..].to_vec(),
            turned_off: false,
        }
    }

    /// CPUs both the server and the client are pinned to (the default split shares none; only
    /// `--server-cpus` and `--client-cpus` given together can).
    pub fn shared(&self) -> Vec<usize> {
        let client = &self.client;
        self.server
            .iter()
            .copied()
            .filter(|c| client.contains(c))
            .collect()
    }

    /// The one-line warning for CPUs the server and the client share, if they do.
    pub fn overlap_warning(&self) -> Option<String> {
        let shared = self.shared();
        (!shared.is_empty()).then(|| {
            format!(
                "--server-cpus and --client-cpus share {}: server and client compete there, so a \
                 row can measure that contention (without the flags they get disjoint CPUs)",
                cpu_list(&shared)
            )
        })
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let shared = self.shared();
        let sharing = match shared.is_empty() {
            true => String::new(),
            false => format!(" (sharing {})", cpu_list(&shared)),
        };
        match (self.server.is_empty(), self.client.is_empty()) {
            (true, true) if self.turned_off => {
                "not pinned (--no-pin): server and client share the CPUs".into()
            }
            (true, true) => "not pinned (fewer than 2 CPUs): server and client share them".into(),
            (false, false) => format!(
                "server pinned to {}, client to {}{sharing}",
                cpu_list(&self.server),
                cpu_list(&self.client)
            ),
            (false, true) => format!(
                "server pinned to {}, client not pinned",
                cpu_list(&self.server)
            ),
            (true, false) => format!("client pinned to {}", cpu_list(&self.client)),
        }
    }
}

/// `CPU 0` or `CPUs 0,1`.
fn cpu_list(cpus: &[usize]) -> String {
    let s: Vec<String> = cpus.iter().map(usize::to_string).collect();
    format!(
        "CPU{} {}",
        if cpus.len() > 1 { "s" } else { "" },
        s.join(",")
    )
}

/// The CPUs this process may run on.
pub fn available_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pid 0 is this thread; the pointer and size describe `set`.
    let rc = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return (0..n).collect();
    }
    // SAFETY: CPU_ISSET reads the set filled above, for indexes below its capacity.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|i| unsafe { libc::CPU_ISSET(*i, &set) })
        .collect()
}

/// `httpvs-compare-20250101-120000.html`: the default report name, from the Unix time (UTC).
pub fn default_report_name(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "httpvs-compare-{y:04}{m:02}{d:02}-{:02}{:02}{:02}.html",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_overrides() {
        let o = parse_shape_overrides("h2c=8x60,h1=120").unwrap();
        assert_eq!(o[&Variant::H2c].0[0].to_string(), "8x60");
        assert_eq!(o[&Variant::H1].0[0].connections, 120);
        let o = parse_shape_overrides("h1=16,64").unwrap();
        assert_eq!(o[&Variant::H1].0.len(), 2);
        assert!(parse_shape_overrides("8x60")
            .unwrap_err()
            .contains("names no protocol"));
        assert!(parse_shape_overrides("h9=1").is_err());
        assert!(parse_shape_overrides("h2=4x32,h2=8x8")
            .unwrap_err()
            .contains("h2 is named twice"));
    }

    #[test]
    fn cpu_lists_and_split() {
        assert_eq!(parse_cpus("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpus("3,1,1,2").unwrap(), vec![3, 1, 2]);
        assert!(parse_cpus("x").is_err());
        let p = Pinning::split(&[0, 1]);
        assert_eq!((p.server, p.client), (vec![0], vec![1]));
        assert_eq!(Pinning::split(&[0]), Pinning::default());
        assert!(!available_cpus().is_empty());
    }

    #[test]
    fn overlapping_pinning_is_named() {
        let split = Pinning::split(&[0, 1, 2, 3]);
        assert!(split.shared().is_empty() && split.overlap_warning().is_none());
        assert_eq!(
            split.describe(),
            "server pinned to CPUs 0,1, client to CPUs 2,3"
        );
        // --no-pin is the reason, whatever the CPU count (it read "fewer than 2 CPUs" on 2).
        let off = Pinning {
            turned_off: true,
            ..Pinning::default()
        };
        assert_eq!(
            off.describe(),
            "not pinned (--no-pin): server and client share the CPUs"
        );
        assert!(Pinning::split(&[0])
            .describe()
            .contains("fewer than 2 CPUs"));
        let same = Pinning {
            server: vec![0],
            client: vec![0],
            turned_off: false,
        };
        assert_eq!(
            same.describe(),
            "server pinned to CPU 0, client to CPU 0 (sharing CPU 0)"
        );
        let part = Pinning {
            server: vec![1],
            client: vec![0, 1],
            turned_off: false,
        };
        assert_eq!(part.shared(), vec![1]);
        let warning = part.overlap_warning().unwrap();
        assert!(
            warning.starts_with("--server-cpus and --client-cpus share CPU 1: "),
            "{warning}"
        );
    }

    #[test]
    fn report_names_carry_the_utc_time() {
        assert_eq!(
            default_report_name(0),
            "httpvs-compare-19700101-000000.html"
        );
        assert_eq!(
            default_report_name(1_735_732_800),
            "httpvs-compare-20250101-120000.html"
        );
    }
}
