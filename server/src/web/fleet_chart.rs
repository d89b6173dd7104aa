//! The overview's "fleet over time": the fleet's buckets over a range as three charts (host
//! cores wasted, guests ticking or polling, host cores saved by the changes made), the changes
//! marked on each, and the same numbers as a table for screen readers and for copying.

use super::chart::{self, Chart};
use super::view;
use crate::analysis::fleet_trend::FleetBucket;
use crate::analysis::range::Range;
use crate::fleet::trend::FleetHistory;

/// At most this many changes are marked: beyond it, the busiest buckets' changes are counted
/// together in one mark each.
const MAX_MARKS: usize = 12;

/// One row of the numbers' table.
pub struct TrendRow {
    pub from: String,
    pub wasted_cores: String,
    pub ticking: String,
    pub saved_cores: String,
}

/// What the overview shows of the fleet over time.
pub struct FleetTrendView {
    pub charts: Vec<Chart>,
    pub rows: Vec<TrendRow>,
    /// The ranges to choose from: (key, chosen).
    pub ranges: Vec<(&'static str, bool)>,
    /// Changes made in the range.
    pub changes: usize,
}

pub fn view(history: &FleetHistory, range: Range, now_ms: i64) -> FleetTrendView {
    let step = history.step_ms;
    // Each point sits mid-bucket, but not past now (the newest bucket is still going).
    let at = |b: &FleetBucket| (b.start_ms + step / 2).min(now_ms);
    let series = |value: fn(&FleetBucket) -> Option<f64>| -> Vec<(i64, Option<f64>)> {
        history.buckets.iter().map(|b| (at(b), value(b))).collect()
    };
    let marks = marks(history);
    let from_ms = history.to_ms - range.length_ms();
    let layout = |title: &str, unit: &str, value: fn(&FleetBucket) -> Option<f64>| {
        chart::layout(title, unit, range, from_ms, &series(value), &marks)
    };
    let charts = vec![
        layout("Host cores wasted", "cores", |b| b.wasted_cores),
        layout("Guests ticking or polling while idle", "guests", |b| {
            b.ticking_guests
        }),
        layout("Host cores saved by the changes made", "cores", |b| {
            b.saved_cores
        }),
    ];
    let number = |v: Option<f64>, decimals: usize| {
        v.map_or("—".to_string(), |v| format!("{v:.decimals$}"))
    };
    let rows = history
        .buckets
        .iter()
        .filter(|b| b.points > 0)
        .map(|b| TrendRow {
            from: view::time(b.start_ms),
            wasted_cores: number(b.wasted_cores, 2),
            ticking: number(b.ticking_guests, 1),
            saved_cores: number(b.saved_cores, 2),
        })
        .collect();
    FleetTrendView {
        charts,
        rows,
        ranges: crate::analysis::fleet_trend::FLEET_RANGES
            .iter()
            .map(|r| (r.key(), *r == range))
            .collect(),
        changes: history.changes.len(),
    }
}

/// The changes as chart marks: each one with its guest's name, or, when there are more than
/// [`MAX_MARKS`], one mark per bucket with changes, saying how many.
fn marks(history: &FleetHistory) -> Vec<(i64, String)> {
    if history.changes.len() <= MAX_MARKS {
        return history
            .changes
            .iter()
            .map(|c| (c.at_ms, c.guest.clone()))
            .collect();
    }
    let mut per_bucket: Vec<(i64, usize)> = Vec::new();
    for c in &history.changes {
        let start = c.at_ms - (c.at_ms - history.from_ms).rem_euclid(history.step_ms);
        match per_bucket.last_mut() {
            Some((s, n)) if *s == start => *n += 1,
            _ => per_bucket.push((start, 1)),
        }
    }
    // Still too many: the busiest buckets, in time order.
    if per_bucket.len() > MAX_MARKS {
        per_bucket.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        per_bucket.truncate(MAX_MARKS);
        per_bucket.sort();
    }
    per_bucket
        .into_iter()
        .map(|(start, n)| (start + history.step_ms / 2, format!("{n} changes")))
        .collect()
}
