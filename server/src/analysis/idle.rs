//! Idle or busy, interval by interval.
//!
//! Waste is what a guest costs while it idles; the CPU it uses while it works is work. So each
//! sample interval is judged on its own:
//!
//! - **Reported**: the guest measured its own idle time (the probe's `/proc/stat` reading that
//!   covers the interval). The interval is idle when the guest's vCPUs idled at least
//!   [`IDLE_MIN_REPORTED_FRACTION`] of the time.
//! - **Inferred**, when the guest reported nothing: from the host side an idle guest costs the
//!   same interval after interval (its tick, its timers), and work shows as a rise above that
//!   floor. The guest's quiet level is the [`QUIET_QUANTILE`] of its intervals' host CPU per vCPU
//!   over the window (leaving out intervals of a paused VM, below [`PAUSED_BELOW_CPU_PCT`]); an
//!   interval is busy when it used more than [`BUSY_ABOVE_QUIET_FACTOR`] × that level +
//!   [`BUSY_ABOVE_QUIET_MARGIN_PCT`]. With fewer than [`MIN_INTERVALS_TO_INFER`] intervals
//!   there is no floor to trust and none is called busy. A guest that works all the time has no
//!   quieter floor to rise above, so its intervals all look alike here; telling that guest busy
//!   from polling is the tick classifier's job (and when it says busy, the inferred intervals
//!   count as busy), and the guest's own idle time settles it.

use serde::Serialize;

use super::window::{Interval, Span};

/// Share of the interval a guest's vCPUs must have idled for the interval to count as idle.
pub const IDLE_MIN_REPORTED_FRACTION: f64 = 0.9;
/// Which low quantile of a guest's intervals (host CPU per vCPU) is its quiet level.
pub const QUIET_QUANTILE: f64 = 0.1;
/// An interval above this multiple of the quiet level, plus the margin, is busy.
pub const BUSY_ABOVE_QUIET_FACTOR: f64 = 2.0;
/// ... in percentage points of a core per vCPU, so that a guest whose quiet level is near zero
/// is not called busy for a blip.
pub const BUSY_ABOVE_QUIET_MARGIN_PCT: f64 = 2.0;
/// Intervals needed before any is inferred busy: the quiet level of fewer is one interval's luck.
pub const MIN_INTERVALS_TO_INFER: usize = 6;
/// Host CPU per vCPU below which an interval is a paused VM, not a quiet one (an idle tickless
/// guest costs 0.1-0.4 %), in % of a core.
pub const PAUSED_BELOW_CPU_PCT: f64 = 0.05;
/// How much time an idle reading covers when the guest did not say, in ms: the probe's default
/// delivery interval (it measures the time since its previous delivery).
pub const DEFAULT_READING_SPAN_MS: i64 = 60_000;

/// One idle fraction a guest reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// When it arrived, server clock.
    pub received_ms: i64,
    /// How much guest time it measured, when the guest said.
    pub measured_ms: Option<i64>,
    pub idle_fraction: f64,
}

/// What an interval was judged from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    Reported,
    Inferred,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judgement {
    pub idle: bool,
    pub basis: Basis,
}

/// A guest's intervals over the window, judged and summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activity {
    /// The idle intervals, summed: what waste is computed from.
    #[serde(skip)]
    pub idle: Span,
    /// Measured time in idle and in busy intervals, in seconds.
    pub idle_s: f64,
    pub busy_s: f64,
    /// Measured time judged from the guest's own idle time, and inferred from host CPU, in s.
    pub reported_s: f64,
    pub inferred_s: f64,
    /// The quiet level inference measured against, in % of a core per vCPU.
    pub quiet_cpu_pct_per_vcpu: Option<f64>,
    /// The guest's own idle fraction, time-weighted, over its idle intervals and over all of
    /// them, where it reported any.
    pub reported_idle_when_idle: Option<f64>,
    pub reported_idle_overall: Option<f64>,
}

impl Activity {
    /// Share of the measured time the guest was idle, 0 to 1; `None` with nothing measured.
    pub fn idle_share(&self) -> Option<f64> {
        let total = self.idle_s + self.busy_s;
        (total > 0.0).then(|| self.idle_s / total)
    }

    /// What the intervals were judged from: `reported`, `inferred`, `mixed`, or `none` yet.
    pub fn basis(&self) -> &'static str {
        match (self.reported_s > 0.0, self.inferred_s > 0.0) {
            (true, false) => "reported",
            (false, true) => "inferred",
            (true, true) => "mixed",
            (false, false) => "none",
        }
    }

    /// How the intervals were judged, in one sentence.
    pub fn describe(&self) -> String {
        let Some(share) = self.idle_share() else {
            return "Nothing measured yet.".into();
        };
        let total = self.idle_s + self.busy_s;
        let reported = format!(
            "by the guest's own idle time (an interval is idle when the vCPUs idled at least {:.0} % of it)",
            IDLE_MIN_REPORTED_FRACTION * 100.0
        );
        let inferred = match self.quiet_cpu_pct_per_vcpu {
            Some(quiet) => format!(
                "inferred from host CPU (busy above {BUSY_ABOVE_QUIET_FACTOR} × the quiet level of {quiet:.2} % per vCPU + {BUSY_ABOVE_QUIET_MARGIN_PCT} points)"
            ),
            None => format!(
                "inferred from host CPU (too few intervals to tell busy ones apart: {MIN_INTERVALS_TO_INFER} needed)"
            ),
        };
        let how = match self.basis() {
            "reported" => reported,
            "inferred" => inferred,
            _ => format!(
                "{:.0} s {reported}, {:.0} s {inferred}",
                self.reported_s, self.inferred_s
            ),
        };
        format!(
            "Idle {:.0} % of the {total:.0} s measured, {how}.",
            share * 100.0
        )
    }
}

/// The idle fraction a guest reported over the sample of `length_ms` received at `at_ms`: that
/// of the reading whose measured time overlaps most of the sample. Readings tile time (each
/// measures since the one before), so only the last one before and the first one after the
/// sample can. A sample no reading covers (newer than the newest reading, or from before the
/// guest's probe started, such as a boot) has none, and is judged from the host side.
/// `readings` are oldest first.
pub fn reading_for(readings: &[Reading], at_ms: i64, length_ms: f64) -> Option<f64> {
    let first_after = readings.partition_point(|r| r.received_ms < at_ms);
    let sample = (at_ms as f64 - length_ms, at_ms as f64);
    let overlap = |r: &Reading| {
        let measured_from =
            (r.received_ms - r.measured_ms.unwrap_or(DEFAULT_READING_SPAN_MS)) as f64;
        (sample.1.min(r.received_ms as f64) - sample.0.max(measured_from)).max(0.0)
    };
    [first_after.checked_sub(1), Some(first_after)]
        .into_iter()
        .flatten()
        .filter_map(|i| readings.get(i))
        .map(|r| (overlap(r), r.idle_fraction))
        .filter(|(overlap, _)| *overlap >= length_ms / 2.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, idle)| idle)
}

/// The `QUIET_QUANTILE` of the intervals' host CPU per vCPU, in % of a core, leaving out a
/// paused VM's; `None` with fewer than `MIN_INTERVALS_TO_INFER` left.
fn quiet_level(intervals: &[Interval]) -> Option<f64> {
    let mut levels: Vec<f64> = intervals
        .iter()
        .filter_map(Interval::cpu_pct_per_vcpu)
        .filter(|level| *level >= PAUSED_BELOW_CPU_PCT)
        .collect();
    if levels.len() < MIN_INTERVALS_TO_INFER {
        return None;
    }
    levels.sort_by(f64::total_cmp);
    let index = ((levels.len() - 1) as f64 * QUIET_QUANTILE).round() as usize;
    Some(levels[index])
}

/// Judges each interval idle or busy, in order. With `inferred_busy`, every interval the guest
/// did not report on counts as busy (the classifier found the guest working).
pub fn judge(intervals: &[Interval], inferred_busy: bool) -> Vec<Judgement> {
    let quiet = quiet_level(intervals);
    intervals
        .iter()
        .map(|interval| match interval.guest_idle_fraction {
            Some(idle) => Judgement {
                idle: idle >= IDLE_MIN_REPORTED_FRACTION,
                basis: Basis::Reported,
            },
            None => Judgement {
                idle: !inferred_busy
                    && match (interval.cpu_pct_per_vcpu(), quiet) {
                        (Some(level), Some(quiet)) => {
                            level <= quiet * BUSY_ABOVE_QUIET_FACTOR + BUSY_ABOVE_QUIET_MARGIN_PCT
                        }
                        // Too few intervals to know the floor, or no time to weigh: idle.
                        _ => true,
                    },
                basis: Basis::Inferred,
            },
        })
        .collect()
}

/// Judges the intervals and sums them by outcome.
pub fn activity(intervals: &[Interval]) -> Activity {
    activity_with(intervals, false)
}

/// As [`activity`], with every interval the guest did not report on counted as busy.
pub fn activity_inferred_busy(intervals: &[Interval]) -> Activity {
    activity_with(intervals, true)
}

fn activity_with(intervals: &[Interval], inferred_busy: bool) -> Activity {
    let mut activity = Activity {
        idle: Span::default(),
        idle_s: 0.0,
        busy_s: 0.0,
        reported_s: 0.0,
        inferred_s: 0.0,
        quiet_cpu_pct_per_vcpu: quiet_level(intervals),
        reported_idle_when_idle: None,
        reported_idle_overall: None,
    };
    // (Σ fraction × length, Σ length) of the reported intervals: over idle ones, over all.
    let mut when_idle = (0.0, 0.0);
    let mut overall = (0.0, 0.0);
    for (interval, judgement) in intervals.iter().zip(judge(intervals, inferred_busy)) {
        if judgement.idle {
            activity.idle.add(interval);
            activity.idle_s += interval.length_s;
        } else {
            activity.busy_s += interval.length_s;
        }
        match judgement.basis {
            Basis::Reported => activity.reported_s += interval.length_s,
            Basis::Inferred => activity.inferred_s += interval.length_s,
        }
        if let Some(fraction) = interval.guest_idle_fraction {
            let weighted = (fraction * interval.length_s, interval.length_s);
            overall = (overall.0 + weighted.0, overall.1 + weighted.1);
            if judgement.idle {
                when_idle = (when_idle.0 + weighted.0, when_idle.1 + weighted.1);
            }
        }
    }
    let mean = |(sum, length): (f64, f64)| (length > 0.0).then(|| sum / length);
    activity.reported_idle_when_idle = mean(when_idle);
    activity.reported_idle_overall = mean(overall);
    activity
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(cpu_pct_per_vcpu: f64, reported: Option<f64>) -> Interval {
        Interval {
            length_s: 10.0,
            vcpus: 1,
            host_cpu_s: cpu_pct_per_vcpu / 100.0 * 10.0,
            wakeups: 0,
            guest_idle_fraction: reported,
            parts: None,
            halt_poll_s: None,
        }
    }

    #[test]
    fn intervals_are_judged_by_the_guest_first_then_against_its_quiet_level() {
        const N: Option<f64> = None;
        // (host CPU % per vCPU of each interval, reported idle fractions, expected idle flags)
        type Case<'a> = (&'a [f64], &'a [Option<f64>], &'a [bool]);
        let cases: [Case; 9] = [
            // A nohz=off guest idling (4.75-5.75 % measured on TCG): all idle.
            (&[5.3, 4.9, 5.7, 5.1, 5.2, 5.0], &[N; 6], &[true; 6]),
            // The same guest running a job for two intervals: those are busy.
            (
                &[5.3, 60.0, 98.0, 5.1, 5.2, 5.0],
                &[N; 6],
                &[true, false, false, true, true, true],
            ),
            // A tickless guest near zero is not called busy for a blip of 1.5 points.
            (&[0.3, 0.4, 1.9, 0.3, 0.3, 0.4], &[N; 6], &[true; 6]),
            // One quiet interval is not the floor: the ticking ones stay idle.
            (&[5.3, 0.5, 5.7, 5.1, 5.2, 5.0], &[N; 6], &[true; 6]),
            // Nor is a paused VM's nothing.
            (
                &[5.3, 0.0, 0.01, 0.0, 5.2, 5.0, 5.1, 5.4, 5.3, 5.2],
                &[N; 10],
                &[true; 10],
            ),
            // Too few intervals to know the floor: none is called busy.
            (&[5.3, 90.0, 5.1], &[N; 3], &[true; 3]),
            // Flat out all the time: no quieter floor, so nothing stands out (the classifier
            // and the guest's own idle time decide whether that is work or polling).
            (&[99.0, 99.5, 98.7, 99.1, 99.0, 98.9], &[N; 6], &[true; 6]),
            // The guest's own idle time wins over the host's view, both ways.
            (
                &[99.0, 99.5, 5.0],
                &[Some(0.99), Some(0.95), Some(0.3)],
                &[true, true, false],
            ),
            (&[5.0, 5.0], &[Some(0.89), None], &[false, true]),
        ];
        for (levels, reported, expected) in cases {
            let intervals: Vec<Interval> = levels
                .iter()
                .zip(reported)
                .map(|(l, r)| interval(*l, *r))
                .collect();
            let idle: Vec<bool> = judge(&intervals, false).iter().map(|j| j.idle).collect();
            assert_eq!(idle, expected, "{levels:?} {reported:?}");
        }
        // A guest the classifier found working: what it did not report on is busy.
        let intervals = [interval(99.0, None), interval(99.0, Some(0.95))];
        let idle: Vec<bool> = judge(&intervals, true).iter().map(|j| j.idle).collect();
        assert_eq!(idle, [false, true]);
        let a = activity_inferred_busy(&intervals);
        assert_eq!((a.idle_s, a.busy_s), (10.0, 10.0));
    }

    #[test]
    fn activity_sums_idle_intervals_and_says_how_they_were_judged() {
        let intervals = [
            interval(5.0, None),
            interval(80.0, None),
            interval(5.0, Some(0.97)),
            interval(5.0, None),
            interval(5.0, None),
            interval(5.0, None),
        ];
        let a = activity(&intervals);
        assert_eq!((a.idle_s, a.busy_s), (50.0, 10.0));
        assert_eq!((a.reported_s, a.inferred_s), (10.0, 50.0));
        assert!((a.idle.host_cpu_s - 2.5).abs() < 1e-9, "{a:?}");
        assert!((a.idle_share().unwrap() - 5.0 / 6.0).abs() < 1e-9);
        assert_eq!(a.reported_idle_when_idle, Some(0.97));
        let b = activity(&[interval(5.0, Some(0.99)), interval(90.0, Some(0.09))]);
        assert_eq!(b.reported_idle_when_idle, Some(0.99));
        assert!(
            (b.reported_idle_overall.unwrap() - 0.54).abs() < 1e-9,
            "{b:?}"
        );
        let text = a.describe();
        assert!(text.contains("Idle 83 % of the 60 s"), "{text}");
        assert!(text.contains("quiet level of 5.00 %"), "{text}");
        let few = activity(&intervals[..3]).describe();
        assert!(text != few && few.contains("too few intervals"), "{few}");
        assert!(text.contains("10 s by the guest's own idle time"), "{text}");
        assert_eq!(a.basis(), "mixed");
        assert_eq!(activity(&[]).idle_share(), None);
        assert_eq!(activity(&[]).basis(), "none");
    }

    #[test]
    fn an_interval_takes_the_reading_that_measured_it() {
        let reading = |received_ms, measured_ms, idle_fraction| Reading {
            received_ms,
            measured_ms,
            idle_fraction,
        };
        let readings = [
            reading(60_000, Some(60_000), 0.99),
            reading(120_000, Some(60_000), 0.40),
            reading(180_000, None, 0.98),
            // A rebooted guest's probe: its first reading measured only one second.
            reading(400_000, Some(1_000), 0.95),
            reading(405_000, Some(5_000), 0.97),
        ];
        // (sample received at, expected reading), for 10 s samples.
        let cases = [
            (0, None),
            (10_000, Some(0.99)),
            (60_000, Some(0.99)),
            // Mostly measured by the reading before it, then mostly by the one after.
            (61_000, Some(0.99)),
            (66_000, Some(0.40)),
            (130_000, Some(0.98)),
            // Newer than the newest reading of that run: nothing measured it.
            (200_000, None),
            // The boot before the probe started is not covered by its first reading, which
            // measured one second: not most of the sample that holds it.
            (390_000, None),
            (400_000, None),
            // The next reading measured the five seconds before it: half of a 10 s sample.
            (405_000, Some(0.97)),
            (411_000, None),
        ];
        for (at, expected) in cases {
            assert_eq!(reading_for(&readings, at, 10_000.0), expected, "at {at}");
        }
        // A shorter sample is mostly covered by the one-second reading.
        assert_eq!(reading_for(&readings, 400_000, 1_000.0), Some(0.95));
        assert_eq!(reading_for(&[], 0, 10_000.0), None);
    }
}
