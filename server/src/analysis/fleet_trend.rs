//! The fleet over time: a point of the fleet's totals every five minutes (as the server judged
//! them then), and the same points averaged into the buckets a chart or the API shows. Pure.

use serde::Serialize;
use sqlx::FromRow;

use super::range::Range;

/// How often a point is written: the analysis window, over which each guest's figures average.
pub const POINT_EVERY_MS: i64 = 5 * 60 * 1000;

/// The ranges the fleet is shown over: its points come every five minutes, so not the hour.
pub const FLEET_RANGES: [Range; 3] = [Range::Day, Range::Week, Range::Month];

/// The range of [`FLEET_RANGES`] a key names (`24h`, `7d`, `30d`).
pub fn fleet_range(key: &str) -> Option<Range> {
    Range::parse(key).filter(|r| FLEET_RANGES.contains(r))
}

/// The keys of [`FLEET_RANGES`], for a message: `24h, 7d, 30d`.
pub fn fleet_range_keys() -> String {
    FLEET_RANGES.map(Range::key).join(", ")
}

/// The fleet's totals at one time, as stored.
#[derive(Debug, Clone, Copy, PartialEq, FromRow)]
pub struct FleetPoint {
    /// The start of the five minutes it was written in, Unix ms.
    pub at_ms: i64,
    /// Active guests, and those of them that tick or poll while idle.
    pub guests: i64,
    pub ticking: i64,
    /// Host CPU wasted while idle over the fleet, in % of one core.
    pub wasted_cpu_pct: f64,
    /// Host CPU the kernel and command-line changes measured so far save, in % of one core,
    /// and how many guests' changes that is.
    pub saved_cpu_pct: f64,
    pub changes: i64,
}

impl FleetPoint {
    /// The point written at `now_ms`: its time is the start of its five minutes, so that one
    /// written twice in them (a restart, a second server taking over) replaces the first.
    pub fn at(now_ms: i64) -> i64 {
        now_ms - now_ms.rem_euclid(POINT_EVERY_MS)
    }
}

/// The points of one bucket of a range, averaged; `None` figures where no point fell in it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FleetBucket {
    /// Where the bucket starts, Unix ms; it lasts the range's step.
    pub start_ms: i64,
    /// Points averaged into it (one every five minutes the server ran).
    pub points: usize,
    /// Host cores wasted while idle, on average over its points.
    pub wasted_cores: Option<f64>,
    /// Guests that ticked or polled while idle, and active guests, on average.
    pub ticking_guests: Option<f64>,
    pub guests: Option<f64>,
    /// Host cores the changes measured so far saved, on average.
    pub saved_cores: Option<f64>,
}

/// The buckets of `step_ms` from `from_ms` (inclusive) to `to_ms` (exclusive), each the mean of
/// the points in it; `points` in any order, those outside the range left out. Linear in the
/// points and the buckets.
pub fn buckets(points: &[FleetPoint], from_ms: i64, to_ms: i64, step_ms: i64) -> Vec<FleetBucket> {
    assert!(step_ms > 0, "a bucket lasts some time");
    let count = usize::try_from((to_ms - from_ms).max(0).div_euclid(step_ms)).unwrap_or(0)
        + usize::from((to_ms - from_ms).rem_euclid(step_ms) > 0);
    // (points, wasted, ticking, guests, saved) summed per bucket.
    let mut sums = vec![(0usize, 0.0, 0.0, 0.0, 0.0); count];
    for p in points {
        if p.at_ms < from_ms || p.at_ms >= to_ms {
            continue;
        }
        let i = ((p.at_ms - from_ms) / step_ms) as usize;
        let s = &mut sums[i];
        s.0 += 1;
        s.1 += p.wasted_cpu_pct / 100.0;
        s.2 += p.ticking as f64;
        s.3 += p.guests as f64;
        s.4 += p.saved_cpu_pct / 100.0;
    }
    sums.into_iter()
        .enumerate()
        .map(|(i, (n, wasted, ticking, guests, saved))| {
            let mean = |sum: f64| (n > 0).then(|| sum / n as f64);
            FleetBucket {
                start_ms: from_ms + i as i64 * step_ms,
                points: n,
                wasted_cores: mean(wasted),
                ticking_guests: mean(ticking),
                guests: mean(guests),
                saved_cores: mean(saved),
            }
        })
        .collect()
}

/// The span a range covers at `now_ms`: whole steps, the last one holding `now_ms`, so that
/// buckets fall on the same times whenever they are asked for. `[from_ms, to_ms)`.
pub fn window(range: Range, now_ms: i64) -> (i64, i64) {
    let step = range.bucket_ms();
    let to_ms = now_ms - now_ms.rem_euclid(step) + step;
    (to_ms - range.length_ms(), to_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at_ms: i64, guests: i64, ticking: i64, wasted: f64, saved: f64) -> FleetPoint {
        FleetPoint {
            at_ms,
            guests,
            ticking,
            wasted_cpu_pct: wasted,
            saved_cpu_pct: saved,
            changes: 0,
        }
    }

    #[test]
    fn a_point_belongs_to_the_five_minutes_it_was_written_in() {
        let cases = [
            (0, 0),
            (299_999, 0),
            (300_000, 300_000),
            (1_000_123, 900_000),
        ];
        for (now, at) in cases {
            assert_eq!(FleetPoint::at(now), at, "{now}");
        }
    }

    #[test]
    fn a_window_is_whole_steps_ending_with_the_one_now_is_in() {
        const H: i64 = 3_600_000;
        let cases = [
            (
                Range::Day,
                10 * H + 1,
                (10 * H + 900_000 - 24 * H, 10 * H + 900_000),
            ),
            (Range::Week, 10 * H, (11 * H - 7 * 24 * H, 11 * H)),
            (Range::Month, 10 * H, (12 * H - 30 * 24 * H, 12 * H)),
        ];
        for (range, now, expected) in cases {
            assert_eq!(window(range, now), expected, "{range:?}");
            let (from, to) = window(range, now);
            assert!((from..to).contains(&now));
            assert_eq!((to - from) % range.bucket_ms(), 0);
        }
    }

    #[test]
    fn buckets_average_the_points_in_them_and_leave_gaps_empty() {
        const STEP: i64 = 900_000;
        let points = [
            point(0, 10, 4, 200.0, 0.0),
            point(300_000, 12, 2, 100.0, 50.0),
            // The second bucket has no point; the third one.
            point(1_800_000, 20, 5, 40.0, 10.0),
            // Outside the range: before it and at its end.
            point(-300_000, 99, 99, 999.0, 999.0),
            point(2_700_000, 99, 99, 999.0, 999.0),
        ];
        let got = buckets(&points, 0, 2_700_000, STEP);
        let expected = [
            FleetBucket {
                start_ms: 0,
                points: 2,
                wasted_cores: Some(1.5),
                ticking_guests: Some(3.0),
                guests: Some(11.0),
                saved_cores: Some(0.25),
            },
            FleetBucket {
                start_ms: STEP,
                points: 0,
                wasted_cores: None,
                ticking_guests: None,
                guests: None,
                saved_cores: None,
            },
            FleetBucket {
                start_ms: 2 * STEP,
                points: 1,
                wasted_cores: Some(0.4),
                ticking_guests: Some(5.0),
                guests: Some(20.0),
                saved_cores: Some(0.1),
            },
        ];
        assert_eq!(got, expected);
        // A range that does not end on a step has a last, shorter bucket.
        assert_eq!(buckets(&points, 0, 2_000_000, STEP).len(), 3);
        assert!(buckets(&points, 0, 0, STEP).is_empty());
    }
}
