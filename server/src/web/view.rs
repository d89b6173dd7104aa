//! Figures formatted for people: units, rounding and dates in one place.

use chrono::{DateTime, Utc};

use crate::analysis::plan;
use crate::fleet::AnalysedGuest;

/// A percentage of a core with sensible precision: small values keep two decimals.
pub fn pct(value: f64) -> String {
    if value >= 10.0 {
        format!("{value:.1} %")
    } else {
        format!("{value:.2} %")
    }
}

pub fn rate(value: f64) -> String {
    format!("{value:.0}")
}

/// A Unix-milliseconds time as UTC, to the second.
pub fn time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "—".into())
}

/// The cost settings behind a figure, to show beside it.
pub fn cost_basis(model: &crate::analysis::cost::CostModel) -> String {
    format!(
        "at {} W per busy core and {} {} per kWh",
        model.watts_per_busy_core, model.price_per_kwh, model.currency
    )
}

/// A host's tickless baselines in words: `qemu 0.23 % per vCPU (from 2 guests); ...`.
pub fn baselines(host: &crate::fleet::HostTotals) -> String {
    host.baselines
        .iter()
        .map(|b| {
            let from = match b.learned_from_guests {
                0 => "default".to_string(),
                n => format!("from {n} guests"),
            };
            format!(
                "{} {} per vCPU ({from})",
                b.hypervisor,
                pct(b.cpu_pct_per_vcpu)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A length of time in words, to the minute: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// How long ago, roughly, for "last seen".
pub fn ago(ms: i64, now_ms: i64) -> String {
    let s = (now_ms - ms).max(0) / 1000;
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86400),
    }
}

/// A piece of analysis text: plain, or `code` (written between backticks in the rules' text).
pub struct Segment {
    pub text: String,
    pub code: bool,
}

/// Splits text at backticks so that templates can show the commands and parameters as code,
/// still escaped like any other text.
pub fn segments(text: &str) -> Vec<Segment> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| Segment {
            text: part.to_string(),
            code: i % 2 == 1,
        })
        .collect()
}

/// One row of the ranking table.
pub struct GuestRow {
    pub id: i64,
    pub name: String,
    pub host: String,
    pub hypervisor: String,
    pub vcpus: u32,
    pub host_cpu: String,
    pub wakeups: String,
    pub mode: &'static str,
    pub hz: String,
    pub waste: String,
    /// The cause it is filed under, for people; empty when none.
    pub cause: &'static str,
    /// The change planned for it (its cause's), in a few words.
    pub suggestion: Vec<Segment>,
}

impl GuestRow {
    pub fn new(g: &AnalysedGuest) -> Self {
        let v = &g.verdict;
        GuestRow {
            id: g.id.0,
            name: g.name.clone(),
            host: g.host.clone(),
            hypervisor: g.hypervisor.clone(),
            vcpus: g.vcpus,
            host_cpu: v.rates.map_or("—".into(), |r| pct(r.host_cpu_pct)),
            wakeups: v.rates.map_or("—".into(), |r| rate(r.wakeups_per_vcpu_s)),
            mode: v.classification.mode.as_str(),
            hz: v
                .classification
                .estimated_hz
                .map_or(String::new(), |hz| format!("{hz} Hz")),
            waste: pct(v.waste.wasted_cpu_pct),
            cause: v.cause.map_or("", |c| c.label()),
            suggestion: plan::planned(&v.suggestions).map_or_else(Vec::new, |s| segments(s.title)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_well() {
        assert_eq!(pct(0.234), "0.23 %");
        assert_eq!(pct(99.34), "99.3 %");
        assert_eq!(ago(0, 59_000), "59 s ago");
        assert_eq!(ago(0, 7_200_000), "2 h ago");
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
    }

    #[test]
    fn backticks_mark_code() {
        let parts: Vec<(String, bool)> = segments("Remove `nohz=off` now, `x`")
            .into_iter()
            .map(|s| (s.text, s.code))
            .collect();
        assert_eq!(
            parts,
            [
                ("Remove ".to_string(), false),
                ("nohz=off".to_string(), true),
                (" now, ".to_string(), false),
                ("x".to_string(), true)
            ]
        );
    }
}
