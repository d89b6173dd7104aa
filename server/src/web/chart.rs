//! History charts drawn on the server as inline SVG: no script, no chart service. This module
//! only computes geometry; `templates/chart.html` writes the SVG, escaping every label.

use chrono::{DateTime, Utc};

/// Drawing area inside the SVG's 640 × 180 view box, in its units.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 180.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

pub use crate::analysis::range::Range;

/// How a range's times are written under its axis.
fn time_format(range: Range) -> &'static str {
    match range {
        Range::Hour | Range::Day => "%H:%M",
        Range::Week | Range::Month => "%m-%d",
    }
}

/// One chart, ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub unit: String,
    /// SVG `points` of each unbroken run of data (a gap where the guest did not report).
    pub lines: Vec<String>,
    /// Horizontal grid lines: (y, label).
    pub y_ticks: Vec<(f64, String)>,
    /// Time labels under the axis: (x, label, SVG text-anchor), the end ones kept inside.
    pub x_ticks: Vec<(f64, String, &'static str)>,
    /// Vertical marks for kernel or command-line changes: (x, label).
    pub marks: Vec<(f64, String)>,
    /// The latest value in words, for screen readers.
    pub summary: String,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

/// A round upper bound for an axis: 1, 2 or 5 times a power of ten, at least `max`.
pub fn nice_max(max: f64) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|v| *v >= max * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// An axis or summary number: whole numbers as such, others with up to two decimals.
fn label(value: f64) -> String {
    if value >= 100.0 || value == value.round() {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Lays out a series of (time ms, value) points over [from_ms, to_ms], with `marks` (time ms,
/// label). `None` values are gaps.
pub fn layout(
    title: &str,
    unit: &str,
    range: Range,
    from_ms: i64,
    points: &[(i64, Option<f64>)],
    marks: &[(i64, String)],
) -> Chart {
    let to_ms = from_ms + range.length_ms();
    let max = nice_max(points.iter().filter_map(|(_, v)| *v).fold(0.0, f64::max));
    let x =
        |t: i64| LEFT + (t - from_ms) as f64 / (to_ms - from_ms) as f64 * (WIDTH - LEFT - RIGHT);
    let y = |v: f64| HEIGHT - BOTTOM - v / max * (HEIGHT - TOP - BOTTOM);
    let mut lines = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    // A lone point is drawn as a short dash, or it would not show.
    let mut finish = |run: &mut Vec<(f64, f64)>| {
        if let [(px, py)] = run[..] {
            run.push((px + 3.0, py));
        }
        if !run.is_empty() {
            let points: Vec<String> = run
                .iter()
                .map(|(px, py)| format!("{px:.1},{py:.1}"))
                .collect();
            lines.push(points.join(" "));
            run.clear();
        }
    };
    for (t, value) in points {
        match value {
            Some(v) if (from_ms..=to_ms).contains(t) => run.push((x(*t), y(v.clamp(0.0, max)))),
            _ => finish(&mut run),
        }
    }
    finish(&mut run);
    let y_ticks = (0..=4)
        .map(|i| {
            let v = max * f64::from(i) / 4.0;
            (y(v), label(v))
        })
        .collect();
    let x_ticks = (0..=4)
        .map(|i| {
            let t = from_ms + (to_ms - from_ms) * i / 4;
            let text = DateTime::<Utc>::from_timestamp_millis(t)
                .map(|d| d.format(time_format(range)).to_string())
                .unwrap_or_default();
            let anchor = match i {
                0 => "start",
                4 => "end",
                _ => "middle",
            };
            (x(t), text, anchor)
        })
        .collect();
    let marks: Vec<(f64, String)> = marks
        .iter()
        .filter(|(t, _)| (from_ms..=to_ms).contains(t))
        .map(|(t, text)| (x(*t), text.clone()))
        .collect();
    let mut summary = match points.iter().rev().find_map(|(_, v)| *v) {
        Some(v) => format!("{title}: latest {} {unit}", label(v)),
        None => format!("{title}: no data in this range"),
    };
    let changes: Vec<&str> = marks
        .iter()
        .map(|(_, text): &(f64, String)| text.as_str())
        .collect();
    if !changes.is_empty() {
        summary.push_str(&format!("; marked: {}", changes.join(", ")));
    }
    Chart {
        title: title.to_string(),
        unit: unit.to_string(),
        lines,
        y_ticks,
        x_ticks,
        marks,
        summary,
        left: LEFT,
        right: WIDTH - RIGHT,
        top: TOP,
        bottom: HEIGHT - BOTTOM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers() {
        let cases = [
            (0.0, 1.0),
            (0.37, 0.5),
            (4.8, 5.0),
            (5.0, 5.0),
            (17.2, 20.0),
            (99.3, 100.0),
            (650.0, 1000.0),
            (f64::NAN, 1.0),
        ];
        for (max, expected) in cases {
            assert!(
                (nice_max(max) - expected).abs() < 1e-9,
                "{max}: {}",
                nice_max(max)
            );
        }
    }

    #[test]
    fn missing_points_break_the_line_and_marks_outside_are_dropped() {
        let from = 1_000_000;
        let step = Range::Hour.bucket_ms();
        let points: Vec<(i64, Option<f64>)> = (0..6)
            .map(|i| (from + i * step, if i == 2 { None } else { Some(5.0) }))
            .collect();
        let marks = [
            (from + 3 * step, "6.1.0-57".to_string()),
            (from - 1, "before".to_string()),
        ];
        let chart = layout(
            "Host CPU",
            "% of a core",
            Range::Hour,
            from,
            &points,
            &marks,
        );
        assert_eq!(chart.lines.len(), 2, "{:?}", chart.lines);
        let lone = layout("x", "%", Range::Hour, from, &points[..1], &[]);
        assert_eq!(
            lone.lines[0].split(' ').count(),
            2,
            "a lone point still shows"
        );
        assert_eq!(chart.lines[0].split(' ').count(), 2);
        assert_eq!(chart.lines[1].split(' ').count(), 3);
        assert_eq!(chart.marks.len(), 1);
        assert_eq!(chart.marks[0].1, "6.1.0-57");
        // 5.0 on a 0-5 axis sits on the top line; the first point on the left edge.
        assert!(
            chart.lines[0].starts_with("56.0,12.0"),
            "{}",
            chart.lines[0]
        );
        assert_eq!(chart.y_ticks.last().unwrap().1, "5");
        assert_eq!(
            chart.summary,
            "Host CPU: latest 5 % of a core; marked: 6.1.0-57"
        );
        assert_eq!(
            [
                label(1.25),
                label(2.5),
                label(3.75),
                label(0.05),
                label(250.4)
            ],
            ["1.25", "2.5", "3.75", "0.05", "250"]
        );
        let empty = layout("Waste", "%", Range::Day, from, &[], &[]);
        assert!(empty.lines.is_empty());
        assert_eq!(empty.summary, "Waste: no data in this range");
    }
}
