//! Inline SVG charts for the HTML report: grouped bars with error bars, and line charts (CDFs, time series).
//!
//! Hand-written SVG keeps the report one offline file with no script and no library.

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;

/// One bar series: a name, a colour, and per group an optional (median, min, max).
pub struct BarSeries {
    /// Legend name.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// Per group: median and min–max, or None when the group has no such bar.
    pub values: Vec<Option<(f64, f64, f64)>>,
}

/// One line series.
pub struct LineSeries {
    /// Legend name.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// Points (x, y), in x order.
    pub points: Vec<(f64, f64)>,
}

/// Escapes text for HTML and SVG.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Round tick values covering 0..=max (about five of them).
fn ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// The ratio of the largest to the smallest bar above which a bar chart turns log-scale.
const LOG_SPAN: f64 = 20.0;

/// A tick's label: as many decimals as it needs, up to a few (1.5 is "1.5", not "2").
fn tick_label(v: f64) -> String {
    // Steps of 2.5 need a decimal more than their magnitude: 12.5k, 1.25k, 1.25M.
    if v >= 1e6 {
        format!("{}M", trimmed(v / 1e6, 2))
    } else if v >= 1e4 {
        format!("{}k", trimmed(v / 1e3, 1))
    } else if v >= 1e3 {
        format!("{}k", trimmed(v / 1e3, 2))
    } else {
        trimmed(v, 2)
    }
}

/// A bar's value in its tooltip as the tables print it: whole numbers with thousands
/// separators (`683`, `36,784`), decimals only under 10.
fn bar_value(v: f64) -> String {
    if v >= 10.0 {
        super::format::thousands(v)
    } else {
        trimmed(v, 2)
    }
}

/// `v` with at most `decimals` decimals and no trailing zeros.
fn trimmed(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img"><title>{t}</title><text x="{LEFT}" y="18" class="ct">{t}</text>"#,
        t = escape(title)
    );
}

fn legend(out: &mut String, names: &[(&str, &str)]) {
    for (i, (name, color)) in names.iter().enumerate() {
        let y = TOP + 14.0 + i as f64 * 18.0;
        let x = WIDTH - RIGHT + 14.0;
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{}" class="lg">{}</text>"#,
            y - 10.0,
            x + 18.0,
            y,
            escape(name)
        );
    }
}

/// Grid lines and labels at `ticks`, each drawn at `y_of(tick)`.
fn y_axis(
    out: &mut String,
    ticks: &[f64],
    y_of: impl Fn(f64) -> f64,
    label: &str,
    fmt: impl Fn(f64) -> String,
) {
    let plot_h = HEIGHT - TOP - BOTTOM;
    for t in ticks {
        let y = y_of(*t);
        let _ = write!(
            out,
            r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="yt">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            fmt(*t)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" class="al">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(label)
    );
}

/// Grouped bars (one group per label, one bar per series) with min–max error bars. When the
/// values span more than [`LOG_SPAN`] (600k req/s on a clean link, 500 on a lossy one), the y
/// axis is log10, or the small groups' bars would be invisible.
pub fn bar_chart(title: &str, groups: &[String], series: &[BarSeries], y_label: &str) -> String {
    let values = || series.iter().flat_map(|s| s.values.iter().flatten());
    let top_value = values().map(|v| v.2.max(v.0)).fold(0.0, f64::max);
    let low_value = values()
        .map(|v| v.1.min(v.0))
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let log = top_value > 0.0 && low_value < f64::MAX && top_value / low_value > LOG_SPAN;
    let mut out = String::new();
    open(
        &mut out,
        &if log {
            format!("{title} (log scale)")
        } else {
            title.to_string()
        },
    );
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let (ticks, y_of): (Vec<f64>, Box<dyn Fn(f64) -> f64>) = if log {
        let lo = low_value.log10().floor();
        let hi = top_value.log10().ceil().max(lo + 1.0);
        let ticks = (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect();
        let y = move |v: f64| {
            HEIGHT - BOTTOM - (v.max(10f64.powf(lo)).log10() - lo) / (hi - lo) * plot_h
        };
        (ticks, Box::new(y))
    } else {
        let ticks = ticks(top_value * 1.05);
        let top = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
        (
            ticks,
            Box::new(move |v: f64| HEIGHT - BOTTOM - v / top * plot_h),
        )
    };
    y_axis(&mut out, &ticks, &y_of, y_label, tick_label);
    let group_w = plot_w / groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    let floor_y = HEIGHT - BOTTOM;
    for (g, name) in groups.iter().enumerate() {
        let gx = LEFT + g as f64 * group_w;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" class="xt">{}</text>"#,
            gx + group_w / 2.0,
            HEIGHT - BOTTOM + 18.0,
            escape(name)
        );
        for (s, ser) in series.iter().enumerate() {
            let Some((median, min, max)) = ser.values.get(g).copied().flatten() else {
                continue;
            };
            let x = gx + group_w * 0.1 + s as f64 * bar_w;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                y_of(median),
                (bar_w - 2.0).max(1.0),
                (floor_y - y_of(median)).max(0.0),
                ser.color,
                escape(&ser.name),
                bar_value(median)
            );
            if max > min {
                let cx = x + (bar_w - 2.0) / 2.0;
                let _ = write!(
                    out,
                    r#"<path d="M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}h6M{:.1} {:.1}h6" class="eb"/>"#,
                    y_of(min),
                    y_of(max),
                    cx - 3.0,
                    y_of(min),
                    cx - 3.0,
                    y_of(max)
                );
            }
        }
    }
    let names: Vec<(&str, &str)> = series.iter().map(|s| (s.name.as_str(), s.color)).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Lines over a linear or log10 x axis; y runs from 0 to `y_max` (or the data's top), and a
/// linear x axis to `x_end` (a time axis: the measured period) or the last point, the further.
pub fn line_chart(
    title: &str,
    series: &[LineSeries],
    x_log: bool,
    labels: (&str, &str),
    y_max: Option<f64>,
    x_end: Option<f64>,
) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let fx = |x: f64| if x_log { x.max(1e-3).log10() } else { x };
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    for x in xs() {
        x0 = x0.min(fx(x));
        x1 = x1.max(fx(x));
    }
    if !x_log && x0 > 0.0 && x0 != f64::MAX {
        // A linear axis (time) starts at 0, so a lone point sits where its time says.
        x0 = 0.0;
    }
    if let Some(end) = x_end.filter(|e| !x_log && e.is_finite() && *e > 0.0) {
        x0 = x0.min(0.0);
        x1 = if x1 == f64::MIN { end } else { x1.max(end) };
    }
    if x0 >= x1 {
        x0 = if x0 == f64::MAX { 0.0 } else { x0 - 1.0 };
        x1 = x0 + 2.0;
    }
    let data_top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let ticks = ticks(y_max.unwrap_or(data_top * 1.05));
    let top = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    y_axis(
        &mut out,
        &ticks,
        |t| HEIGHT - BOTTOM - t / top * plot_h,
        labels.1,
        tick_label,
    );
    let px = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * plot_w;
    let py = |y: f64| HEIGHT - BOTTOM - y / top * plot_h;
    x_axis(&mut out, x0, x1, x_log, px);
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{}" class="al">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 6.0,
        escape(labels.0)
    );
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        if let [(x, y)] = s.points[..] {
            // One point (a one-second period) is a dot: a path needs two.
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{}"><title>{}</title></circle>"#,
                px(x),
                py(y),
                s.color,
                escape(&s.name)
            );
            continue;
        }
        let mut d = String::new();
        for (i, (x, y)) in s.points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if i == 0 { "M" } else { "L" },
                px(*x),
                py(*y)
            );
        }
        let _ = write!(
            out,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2"><title>{}</title></path>"#,
            s.color,
            escape(&s.name)
        );
    }
    let names: Vec<(&str, &str)> = series.iter().map(|s| (s.name.as_str(), s.color)).collect();
    legend(&mut out, &names);
    out.push_str("</svg>");
    out
}

/// Where a linear x axis from `x0` to `x1` puts `x`, for other modules' tests.
#[cfg(test)]
pub fn x_for_test(x: f64, x0: f64, x1: f64) -> f64 {
    LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)
}

fn x_axis(out: &mut String, x0: f64, x1: f64, x_log: bool, px: impl Fn(f64) -> f64) {
    let values: Vec<f64> = if x_log {
        let at = |mantissas: &[f64]| -> Vec<f64> {
            (x0.floor() as i32..=x1.ceil() as i32)
                .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
                .filter(|v| v.log10() >= x0 - 1e-9 && v.log10() <= x1 + 1e-9)
                .collect()
        };
        let coarse = at(&[1.0, 2.0, 5.0]);
        // Less than a decade (40-82 ms on a 20 ms link) held one label, `50`: every digit then.
        if coarse.len() < 3 {
            at(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
        } else {
            coarse
        }
    } else {
        // Tolerant ends: 3 x 0.2 is a hair above 0.6.
        let eps = (x1 - x0).abs() * 1e-9;
        ticks(x1)
            .into_iter()
            .filter(|v| *v >= x0 - eps && *v <= x1 + eps)
            .collect()
    };
    for v in values {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" class="xt">{}</text>"#,
            px(v),
            HEIGHT - BOTTOM + 16.0,
            tick_label(v)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_keep_the_decimals_they_need() {
        let labels: Vec<String> = ticks(2.0).into_iter().map(tick_label).collect();
        assert_eq!(labels, ["0", "0.5", "1", "1.5", "2"]);
        assert_eq!(tick_label(2500.0), "2.5k");
        assert_eq!(tick_label(5000.0), "5k");
        assert_eq!(tick_label(40000.0), "40k");
        assert_eq!(tick_label(1.5e6), "1.5M");
        assert_eq!(tick_label(12500.0), "12.5k");
        assert_eq!(tick_label(1250.0), "1.25k");
        assert_eq!(tick_label(1750.0), "1.75k");
        assert_eq!(tick_label(0.25), "0.25");
        // Tooltips read as the tables do.
        assert_eq!(bar_value(683.33), "683");
        assert_eq!(bar_value(36784.4), "36,784");
        assert_eq!(bar_value(2.5), "2.5");
    }

    #[test]
    fn a_lone_point_on_a_time_axis_sits_at_its_time() {
        let series = [LineSeries {
            name: "h1".into(),
            color: "#000",
            points: vec![(0.6, 100.0)],
        }];
        let svg = line_chart("t", &series, false, ("s", "req/s"), None, None);
        // The axis runs 0..0.6: the dot is at the plot's right edge.
        let cx = LEFT + (WIDTH - LEFT - RIGHT);
        assert!(svg.contains(&format!(r#"cx="{cx:.1}""#)), "{svg}");
        assert!(svg.contains(">0.6</text>"), "{svg}");
    }

    #[test]
    fn a_time_axis_ends_at_the_measured_period() {
        let series = [LineSeries {
            name: "h1".into(),
            color: "#000",
            points: vec![(0.5, 100.0)],
        }];
        let svg = line_chart("t", &series, false, ("s", "req/s"), None, Some(1.0));
        // The axis runs 0..1: the dot at 0.5 s is mid-plot, and the last tick is 1.
        let cx = LEFT + (WIDTH - LEFT - RIGHT) / 2.0;
        assert!(svg.contains(&format!(r#"cx="{cx:.1}""#)), "{svg}");
        assert!(svg.contains(">1</text>"), "{svg}");
    }

    /// A log axis under a decade wide gets every digit's tick, not just `50`.
    #[test]
    fn a_narrow_log_axis_gets_finer_ticks() {
        let mut out = String::new();
        x_axis(&mut out, 40f64.log10(), 82f64.log10(), true, |x| x);
        let labels: Vec<&str> = out
            .split("class=\"xt\">")
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert_eq!(labels, ["40", "50", "60", "70", "80"]);
        let mut wide = String::new();
        x_axis(&mut wide, 0.05f64.log10(), 10f64.log10(), true, |x| x);
        assert!(!wide.contains(">0.3<"), "{wide}");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(100.0), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0), vec![0.0, 1.0]);
    }

    #[test]
    fn charts_are_svg_with_shapes() {
        let bars = bar_chart(
            "t",
            &["clean".into()],
            &[BarSeries {
                name: "h1".into(),
                color: "#123456",
                values: vec![Some((10.0, 9.0, 11.0))],
            }],
            "req/s",
        );
        assert!(
            bars.starts_with("<svg") && bars.contains("<rect") && bars.contains("class=\"eb\"")
        );
        let lines = line_chart(
            "c",
            &[LineSeries {
                name: "h2c".into(),
                color: "red",
                points: vec![(0.1, 0.0), (1.0, 0.5), (10.0, 1.0)],
            }],
            true,
            ("ms", "fraction"),
            Some(1.0),
            None,
        );
        assert!(lines.contains("<path d=\"M"));
    }

    /// 600k req/s on a clean link next to 500 on a lossy one: a log axis, so the small bar shows.
    #[test]
    fn bars_spanning_decades_go_log_scale() {
        let bars = bar_chart(
            "req/s",
            &["clean".into(), "lossy".into()],
            &[BarSeries {
                name: "h2c".into(),
                color: "#123456",
                values: vec![
                    Some((600_000.0, 590_000.0, 610_000.0)),
                    Some((500.0, 490.0, 510.0)),
                ],
            }],
            "req/s",
        );
        assert!(bars.contains("req/s (log scale)"), "{bars}");
        let heights: Vec<f64> = bars
            .split("height=\"")
            .skip(2) // the svg element's own height
            .take(2) // the two bars (the legend's swatch follows)
            .filter_map(|r| r.split('"').next()?.parse().ok())
            .collect();
        assert!(heights[1] > 20.0, "the lossy bar is visible: {heights:?}");
        assert!(
            bars.contains(">1M</text>") || bars.contains(">100k</text>"),
            "{bars}"
        );
    }
}
