//! Parser of netem's argument syntax (as `tc qdisc ... netem` takes it), with errors that name the bad token.

use super::{Chance, Distribution, Impairment, LossModel, Rate, Reorder};
use std::time::Duration;

/// A netem string that could not be understood; the message names the offending token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    message: String,
}

impl ParseError {
    fn new(message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
        }
    }
}

/// Tokens left to read, with lookahead for optional numeric arguments.
struct Tokens<'a> {
    items: Vec<&'a str>,
    at: usize,
}

impl<'a> Tokens<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let item = self.items.get(self.at).copied();
        self.at += 1;
        item
    }

    fn peek(&self) -> Option<&'a str> {
        self.items.get(self.at).copied()
    }

    /// The argument `what` of keyword `after`, which must be there.
    fn value(&mut self, after: &str, what: &str) -> Result<&'a str, ParseError> {
        self.next()
            .ok_or_else(|| ParseError::new(format!("`{after}` needs {what}")))
    }

    /// The next token if it starts like a number (netem's optional arguments).
    fn optional_number(&mut self) -> Option<&'a str> {
        let next = self.peek()?;
        if next.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-') {
            self.at += 1;
            Some(next)
        } else {
            None
        }
    }
}

/// Times and rates in `text` given as bare numbers, which tc reads as µs and bit/s.
pub fn unitless(text: &str) -> Vec<String> {
    let bare = |t: &str| {
        t.chars().all(|c| c.is_ascii_digit() || c == '.') && t.parse::<f64>().is_ok_and(|v| v > 0.0)
    };
    let items: Vec<&str> = text.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, word) in items.iter().enumerate() {
        let values: &[&str] = match *word {
            "delay" | "latency" => &items[(i + 1).min(items.len())..(i + 3).min(items.len())],
            "rate" => &items[(i + 1).min(items.len())..(i + 2).min(items.len())],
            _ => &[],
        };
        for value in values.iter().filter(|v| bare(v)) {
            let unit = if *word == "rate" { "bit/s" } else { "µs" };
            found.push(format!(
                "{value} (after {word}) has no unit: read as {value} {unit}, as tc does"
            ));
        }
    }
    found
}

/// Parses a whole netem string into an [`Impairment`].
pub fn parse(text: &str) -> Result<Impairment, ParseError> {
    let mut tokens = Tokens {
        items: text.split_whitespace().collect(),
        at: 0,
    };
    let mut imp = Impairment::default();
    let mut distribution_given = false;
    let mut gap_given = false;
    // The keyword whose values were read last, for a value past them.
    let mut last_keyword = None;
    while let Some(word) = tokens.next() {
        match word.to_ascii_lowercase().as_str() {
            "limit" => {
                let count = tokens.value("limit", "a packet count")?;
                imp.limit = parse_whole(count, "limit", 1, u32::MAX)?;
            }
            "delay" | "latency" => {
                imp.delay = parse_time(tokens.value("delay", "a time such as 50ms")?)?;
                if let Some(t) = tokens.optional_number() {
                    imp.jitter = parse_time(t)?;
                    if let Some(c) = tokens.optional_number() {
                        imp.delay_correlation = parse_percent(c)?;
                    }
                }
            }
            "distribution" | "dist" => {
                let name = tokens.value("distribution", "uniform, normal, pareto or paretonormal")?;
                imp.distribution = parse_distribution(name)?;
                distribution_given = true;
            }
            "loss" | "drop" => imp.loss = Some(parse_loss(&mut tokens)?),
            "ecn" => imp.ecn = true,
            "duplicate" => imp.duplicate = parse_chance(&mut tokens, "duplicate")?,
            "corrupt" => imp.corrupt = parse_chance(&mut tokens, "corrupt")?,
            "reorder" => {
                let chance = parse_chance(&mut tokens, "reorder")?;
                let gap = imp.reorder.map_or(0, |r| r.gap);
                imp.reorder = Some(Reorder { chance, gap });
            }
            "gap" => {
                let gap = parse_count(tokens.value("gap", "a packet count")?, "gap")?;
                let chance = imp.reorder.map_or(Chance::NEVER, |r| r.chance);
                imp.reorder = Some(Reorder { chance, gap });
                gap_given = true;
            }
            "rate" => imp.rate = Some(parse_rate_spec(&mut tokens)?),
            "seed" => {
                let value = tokens.value("seed", "a number")?;
                imp.seed = Some(parse_whole(value, "seed", u64::MIN, u64::MAX)?);
            }
            // What an untouched direction prints as.
            "none" => {}
            "slot" => return Err(ParseError::new("`slot` is not supported by httpvs netem")),
            // One direction's options: `load --net` splits "UP | DOWN" at its one `|` before
            // this parser sees either side.
            "|" => {
                return Err(ParseError::new(
                    "`|` splits \"UP | DOWN\", which only load --net takes, with one `|`",
                ))
            }
            _ if crate::PROFILES
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(word)) =>
            {
                return Err(ParseError::new(format!(
                    "`{word}` is a profile, not a netem keyword (netem --profile {word}; load --net {word} alone)"
                )))
            }
            // A value where a keyword should be: one more than the keyword before takes.
            _ if word.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
                return Err(ParseError::new(match last_keyword {
                    Some(keyword) => format!(
                        "`{word}` is one value too many after `{keyword}` (man tc-netem gives \
                         what each keyword takes)"
                    ),
                    None => format!("`{word}` comes before any keyword"),
                }))
            }
            _ => {
                return Err(ParseError::new(format!(
                    "unknown netem keyword `{word}` (expected limit, delay, distribution, loss, ecn, duplicate, corrupt, reorder, gap, rate or seed)"
                )))
            }
        }
        last_keyword = Some(word);
    }
    validate(imp, distribution_given, gap_given)
}

/// The checks `tc` makes after reading all options.
fn validate(
    mut imp: Impairment,
    distribution_given: bool,
    gap_given: bool,
) -> Result<Impairment, ParseError> {
    if distribution_given && imp.jitter.is_zero() {
        return Err(ParseError::new(
            "`distribution` needs a jitter: write `delay TIME JITTER distribution NAME`",
        ));
    }
    if let Some(reorder) = &mut imp.reorder {
        if reorder.chance.probability == 0.0 && gap_given {
            return Err(ParseError::new(
                "`gap` needs a `reorder` above 0% (with 0% nothing is reordered)",
            ));
        }
        if imp.delay.is_zero() {
            return Err(ParseError::new(
                "`reorder` needs a delay: reordered packets skip it (write e.g. `delay 10ms reorder 25%`)",
            ));
        }
        reorder.gap = reorder.gap.max(1);
    }
    if imp.ecn && imp.loss.is_none() {
        return Err(ParseError::new("`ecn` needs a loss model"));
    }
    Ok(imp)
}

fn parse_loss(tokens: &mut Tokens<'_>) -> Result<LossModel, ParseError> {
    let first = tokens.value("loss", "a percentage, `random`, `state` or `gemodel`")?;
    match first.to_ascii_lowercase().as_str() {
        "random" => Ok(LossModel::Random(parse_chance(tokens, "loss random")?)),
        "state" => {
            let p13 = parse_percent(tokens.value("loss state", "p13")?)?;
            let mut p = [p13, 1.0 - p13, 0.0, 1.0, 0.0];
            for slot in p.iter_mut().skip(1) {
                match tokens.optional_number() {
                    Some(t) => *slot = parse_percent(t)?,
                    None => break,
                }
            }
            // Each pair is the chances of leaving one state for two others, so a sum past 100%
            // has no meaning: the kernel's model gives the second what the first leaves, and the
            // banner showed the value as given.
            for (a, b, from) in [(p[0], p[4], "p13 + p14"), (p[1], p[2], "p31 + p32")] {
                if a + b > 1.0 + 1e-9 {
                    return Err(ParseError::new(format!(
                        "loss state: {from} is {}: they are the chances of leaving one state, \
                         at most 100% together",
                        super::show_percent(a + b)
                    )));
                }
            }
            Ok(LossModel::State {
                p13: p[0],
                p31: p[1],
                p32: p[2],
                p23: p[3],
                p14: p[4],
            })
        }
        "gemodel" => {
            let p0 = parse_percent(tokens.value("loss gemodel", "p")?)?;
            let mut p = [p0, 1.0 - p0, 1.0, 0.0];
            for slot in p.iter_mut().skip(1) {
                match tokens.optional_number() {
                    Some(t) => *slot = parse_percent(t)?,
                    None => break,
                }
            }
            Ok(LossModel::GilbertElliott {
                p: p[0],
                r: p[1],
                one_minus_h: p[2],
                one_minus_k: p[3],
            })
        }
        _ => {
            let probability = parse_percent(first)?;
            let correlation = match tokens.optional_number() {
                Some(t) => parse_percent(t)?,
                None => 0.0,
            };
            Ok(LossModel::Random(Chance {
                probability,
                correlation,
            }))
        }
    }
}

fn parse_chance(tokens: &mut Tokens<'_>, keyword: &str) -> Result<Chance, ParseError> {
    let probability = parse_percent(tokens.value(keyword, "a percentage such as 1%")?)?;
    let correlation = match tokens.optional_number() {
        Some(t) => parse_percent(t)?,
        None => 0.0,
    };
    Ok(Chance {
        probability,
        correlation,
    })
}

fn parse_rate_spec(tokens: &mut Tokens<'_>) -> Result<Rate, ParseError> {
    let bytes_per_sec = parse_rate(tokens.value("rate", "a rate such as 10mbit")?)?;
    let mut rate = Rate {
        bytes_per_sec,
        packet_overhead: 0,
        cell_size: 0,
        cell_overhead: 0,
    };
    if let Some(t) = tokens.optional_number() {
        rate.packet_overhead = parse_signed(t, "packet overhead")?;
        if let Some(t) = tokens.optional_number() {
            rate.cell_size = parse_count(t, "cell size")?;
            if let Some(t) = tokens.optional_number() {
                rate.cell_overhead = parse_signed(t, "cell overhead")?;
            }
        }
    }
    Ok(rate)
}

fn parse_distribution(name: &str) -> Result<Distribution, ParseError> {
    match name.to_ascii_lowercase().as_str() {
        "uniform" => Ok(Distribution::Uniform),
        "normal" => Ok(Distribution::Normal),
        "pareto" => Ok(Distribution::Pareto),
        "paretonormal" => Ok(Distribution::ParetoNormal),
        _ => Err(ParseError::new(format!(
            "unknown distribution `{name}` (expected uniform, normal, pareto or paretonormal)"
        ))),
    }
}

/// A probability: `1%`, `0.5%`, or a bare number of percent as `tc` reads it.
fn parse_percent(token: &str) -> Result<f64, ParseError> {
    let number = token.strip_suffix('%').unwrap_or(token);
    match number.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(ParseError::new(format!(
            "bad percentage `{token}`: expected 0% to 100%, e.g. 1% or 0.5%"
        ))),
    }
}

/// A time: `50ms`, `1.5s`, `200us`, `100ns`; a bare number is microseconds, as in `tc`.
fn parse_time(token: &str) -> Result<Duration, ParseError> {
    let split = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    let scale_ns = match unit.to_ascii_lowercase().as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "" | "us" | "usec" | "usecs" | "µs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        _ => f64::NAN,
    };
    let why = match number.parse::<f64>() {
        Ok(v) if scale_ns.is_finite() && v >= 0.0 && v * scale_ns <= 3.6e12 => {
            return Ok(Duration::from_nanos((v * scale_ns).round() as u64));
        }
        // `1h`, `2m`: tc has no such units, and "at most one hour" read as if 1h were over it.
        Ok(_) if !scale_ns.is_finite() => {
            format!("`{unit}` is not a unit here: give s, ms, us or ns, as tc takes them")
        }
        Ok(v) if v >= 0.0 => "at most one hour (3600s)".to_string(),
        _ => "expected e.g. 50ms, 1.5s, 200us".to_string(),
    };
    Err(ParseError::new(format!("bad time `{token}`: {why}")))
}

/// The fastest rate a link may be given, bits/s: far past what the relay carries.
const MAX_RATE_BITS: f64 = 1e15;

/// A rate as `tc` reads it: `10mbit`, `512kbit`, `1gbit`, `100kbps` (bytes), a bare number of bits/s.
fn parse_rate(token: &str) -> Result<u64, ParseError> {
    let split = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    let bits_per_unit: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "kibit" => 1024.0,
        "mbit" => 1e6,
        "mibit" => 1024.0 * 1024.0,
        "gbit" => 1e9,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "kibps" => 8.0 * 1024.0,
        "mbps" => 8e6,
        "mibps" => 8.0 * 1024.0 * 1024.0,
        "gbps" => 8e9,
        "gibps" => 8.0 * 1024.0 * 1024.0 * 1024.0,
        _ => f64::NAN,
    };
    match number.parse::<f64>() {
        // Past this the value would be cut to u64's largest, unsaid.
        Ok(v) if bits_per_unit.is_finite() && v * bits_per_unit > MAX_RATE_BITS => {
            Err(ParseError::new(format!(
                "rate `{token}` is over 1000tbit, the most a link may be given"
            )))
        }
        Ok(v) if bits_per_unit.is_finite() && v * bits_per_unit >= 8.0 => {
            Ok((v * bits_per_unit / 8.0).round() as u64)
        }
        // The link paces whole bytes: say so rather than "bad".
        Ok(v) if bits_per_unit.is_finite() && v >= 0.0 => Err(ParseError::new(format!(
            "rate `{token}` is below 8bit (1 byte/s), the least the link paces (it paces whole bytes: 15bit is 16bit)"
        ))),
        _ => Err(ParseError::new(format!(
            "bad rate `{token}`: expected e.g. 10mbit, 512kbit, 1gbit or 100kbps (bytes)"
        ))),
    }
}

fn parse_count(token: &str, what: &str) -> Result<u32, ParseError> {
    parse_whole(token, what, u32::MIN, u32::MAX)
}

fn parse_signed(token: &str, what: &str) -> Result<i32, ParseError> {
    parse_whole(token, what, i32::MIN, i32::MAX)
}

/// A whole number from `min` to `max`; one past them says so, where it read "expected a whole
/// number" of a whole number.
fn parse_whole<T>(token: &str, what: &str, min: T, max: T) -> Result<T, ParseError>
where
    T: std::str::FromStr<Err = std::num::ParseIntError> + std::fmt::Display + PartialOrd,
{
    let out_of_range = || {
        ParseError::new(format!(
            "bad {what} `{token}`: expected a whole number from {min} to {max}"
        ))
    };
    let value: T = token.parse().map_err(|e: std::num::ParseIntError| {
        use std::num::IntErrorKind::{NegOverflow, PosOverflow};
        // `-1` is a whole number, out of an unsigned range: said as 0 is.
        let negative = token
            .strip_prefix('-')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        match e.kind() {
            PosOverflow | NegOverflow => out_of_range(),
            _ if negative => out_of_range(),
            _ => ParseError::new(format!("bad {what} `{token}`: expected a whole number")),
        }
    })?;
    if value < min || value > max {
        return Err(out_of_range());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole number too large for its field says so (it read "expected a whole number").
    #[test]
    fn a_whole_number_out_of_range_names_the_range() {
        // The range a limit may take: 0 is refused too (it said "from 0", then refused 0).
        for limit in ["4294967296", "0", "-1"] {
            let e = parse(&format!("limit {limit}")).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "bad limit `{limit}`: expected a whole number from 1 to 4294967295"
                )),
                "{e}"
            );
        }
        let e = parse("seed 18446744073709551616").unwrap_err().to_string();
        assert!(e.contains("from 0 to 18446744073709551615"), "{e}");
        let e = parse("limit ten").unwrap_err().to_string();
        assert!(e.ends_with("expected a whole number"), "{e}");
    }

    #[test]
    fn bare_times_and_rates_are_pointed_out() {
        assert_eq!(
            unitless("delay 20 5ms 25% rate 10"),
            [
                "20 (after delay) has no unit: read as 20 µs, as tc does",
                "10 (after rate) has no unit: read as 10 bit/s, as tc does",
            ]
        );
        assert!(unitless("delay 20ms 5ms loss 1% rate 10mbit limit 100").is_empty());
        assert!(unitless("delay 0").is_empty());
    }

    /// Edges said as they are: an hour is within "at most one hour", a rate past what a u64
    /// holds is refused (it was cut silently), a second `|` and a 0% reorder with a gap get
    /// their own words.
    #[test]
    fn edges_of_times_rates_and_splits_are_said() {
        assert_eq!(
            parse("delay 3600s").unwrap().delay,
            Duration::from_secs(3600)
        );
        let err = parse("delay 3601s").unwrap_err().to_string();
        assert!(err.ends_with("at most one hour (3600s)"), "{err}");
        // Minutes and hours are no units of tc's: said so, not "at most one hour".
        let err = parse("delay 1h").unwrap_err().to_string();
        assert!(err.contains("`h` is not a unit here"), "{err}");
        let err = parse("delay 5xs").unwrap_err().to_string();
        assert!(err.contains("`xs` is not a unit here"), "{err}");
        let err = parse("delay 1.2.3ms").unwrap_err().to_string();
        assert!(err.contains("expected e.g. 50ms"), "{err}");
        let err = parse("rate 99999999999999999999999tbit")
            .unwrap_err()
            .to_string();
        assert!(err.contains("over 1000tbit"), "{err}");
        assert_eq!(parse("rate 1000tbit").unwrap().to_string(), "rate 1000tbit");
        let err = parse("delay 1ms | loss 1%").unwrap_err().to_string();
        assert!(err.contains("`|` splits \"UP | DOWN\""), "{err}");
        let err = parse("delay 10ms reorder 0% gap 5")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`gap` needs a `reorder` above 0%"), "{err}");
    }

    #[test]
    fn a_profile_name_among_impairments_points_at_the_profile() {
        let err = parse("wan").unwrap_err().to_string();
        assert!(
            err.contains("`wan` is a profile, not a netem keyword"),
            "{err}"
        );
        // A value past what its keyword takes reads as a keyword: said as a value.
        let err = parse("loss 5% 10% 6%").unwrap_err().to_string();
        assert!(
            err.contains("`6%` is one value too many after `loss`"),
            "{err}"
        );
        let err = parse("5ms").unwrap_err().to_string();
        assert!(err.contains("`5ms` comes before any keyword"), "{err}");
        let err = parse("delay 5ms bogus").unwrap_err().to_string();
        assert!(err.contains("unknown netem keyword `bogus`"), "{err}");
    }

    #[test]
    fn full_syntax_reads_every_option() {
        let imp = parse(
            "limit 500 delay 50ms 10ms 25% distribution normal loss 1% 25% duplicate 0.1% corrupt 1% reorder 25% 50% gap 5 rate 10mbit 14 seed 7",
        )
        .unwrap();
        assert_eq!(imp.limit, 500);
        assert_eq!(imp.delay, Duration::from_millis(50));
        assert_eq!(imp.jitter, Duration::from_millis(10));
        assert!((imp.delay_correlation - 0.25).abs() < 1e-12);
        assert_eq!(imp.distribution, Distribution::Normal);
        assert_eq!(
            imp.loss,
            Some(LossModel::Random(Chance {
                probability: 0.01,
                correlation: 0.25
            }))
        );
        assert!((imp.duplicate.probability - 0.001).abs() < 1e-12);
        assert!((imp.corrupt.probability - 0.01).abs() < 1e-12);
        let reorder = imp.reorder.unwrap();
        assert_eq!(reorder.gap, 5);
        assert!((reorder.chance.correlation - 0.5).abs() < 1e-12);
        let rate = imp.rate.unwrap();
        assert_eq!(rate.bytes_per_sec, 1_250_000);
        assert_eq!(rate.packet_overhead, 14);
        assert_eq!(imp.seed, Some(7));
    }

    /// The chances of leaving one state add up to 100% at most: `60% 60% 60%` ran with p31
    /// at 40% while the banner said 60%.
    #[test]
    fn loss_state_chances_of_leaving_a_state_are_checked() {
        let err = parse("loss state 60% 60% 60%").unwrap_err().to_string();
        assert!(err.contains("p31 + p32 is 120%"), "{err}");
        let err = parse("loss state 60% 30% 5% 80% 50%")
            .unwrap_err()
            .to_string();
        assert!(err.contains("p13 + p14 is 110%"), "{err}");
        assert!(parse("loss state 50% 50% 50% 80% 50%").is_ok());
    }

    #[test]
    fn loss_models_take_tc_defaults() {
        let state = parse("loss state 1%").unwrap().loss.unwrap();
        assert_eq!(
            state,
            LossModel::State {
                p13: 0.01,
                p31: 0.99,
                p32: 0.0,
                p23: 1.0,
                p14: 0.0
            }
        );
        let ge = parse("loss gemodel 1% 10% 70% 0.1%").unwrap().loss.unwrap();
        assert_eq!(
            ge,
            LossModel::GilbertElliott {
                p: 0.01,
                r: 0.1,
                one_minus_h: 0.7,
                one_minus_k: 0.001
            }
        );
        let random = parse("loss random 3").unwrap().loss.unwrap();
        assert_eq!(
            random,
            LossModel::Random(Chance {
                probability: 0.03,
                correlation: 0.0
            })
        );
    }

    #[test]
    fn errors_name_the_bad_token() {
        let cases = [
            ("delay 50parsecs", "50parsecs"),
            ("loss 120%", "120%"),
            ("lose 1%", "lose"),
            ("rate fast", "fast"),
            ("delay 10ms 1ms distribution gaussian", "gaussian"),
            ("limit many", "many"),
        ];
        for (text, token) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(&format!("`{token}`")), "{text}: {err}");
        }
        assert!(parse("reorder 25%")
            .unwrap_err()
            .to_string()
            .contains("delay"));
        assert!(parse("delay").unwrap_err().to_string().contains("`delay`"));
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "delay 50ms 10ms 25% distribution pareto loss 1% duplicate 0.1% corrupt 1% reorder 25% gap 5 rate 10mbit",
            "limit 20 loss state 1% 30% 5% 80% 0.5%",
            "loss gemodel 1% 10% 70% 0.1% ecn",
            "rate 1500kbit 14 48 5",
        ] {
            let imp = parse(text).unwrap();
            assert_eq!(parse(&imp.to_string()).unwrap(), imp, "{text} -> {imp}");
        }
    }

    #[test]
    fn units_follow_tc() {
        assert_eq!(parse_time("100").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_time("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_rate("100kbps").unwrap(), 100_000);
        assert_eq!(parse_rate("1gbit").unwrap(), 125_000_000);
    }
}
