//! Waste accumulated over time: a guest's history cut into analysis windows, each judged the way
//! the ranking judges the present (idle intervals, tick mode from the facts of that time), and
//! priced against the host's tickless baseline.
//!
//! Each window's judgement is kept as a [`Summary`] of sums, minima and maxima, so that any
//! longer stretch is the sum of its windows: a stored rollup of a window gives exactly what its
//! raw samples gave, and rollups of rollups (an hour of five-minute windows) stay exact too.

use serde::Serialize;

use super::verdict::{judged, settled};
use super::waste::{self, Baseline};
use super::window::Window;
use super::{idle, tick_mode};

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Accumulated {
    /// Host CPU wasted, in core-hours.
    pub wasted_core_hours: f64,
    /// Time measured (the guest running and reported), and the part of it judged idle, in hours.
    pub measured_hours: f64,
    pub idle_hours: f64,
}

/// What one window of a guest's history shows, judged as the ranking judges the present.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Host CPU over the whole window, in % of one core.
    pub host_cpu_pct: Option<f64>,
    pub wakeups_per_vcpu_s: Option<f64>,
    /// Share of the window the guest idled, 0 to 1.
    pub idle_share: Option<f64>,
    /// Waste averaged over the window, in % of one core.
    pub wasted_cpu_pct: f64,
    pub length_s: f64,
    pub idle_s: f64,
}

/// One or more analysis windows of a guest, each judged on its own, summed. A stored rollup
/// holds one under the same column names (`sqlx::FromRow`: storage reads it back whole).
#[derive(Debug, Clone, Copy, PartialEq, Default, sqlx::FromRow)]
pub struct Summary {
    pub samples: i64,
    /// Measured time, in seconds; vCPUs × time, in vCPU-seconds.
    pub length_s: f64,
    pub vcpu_s: f64,
    /// Host CPU used, in core-seconds.
    pub host_cpu_s: f64,
    pub wakeups: i64,
    /// Time judged idle and busy, in seconds.
    pub idle_s: f64,
    pub busy_s: f64,
    /// Host CPU wasted beyond the tickless baseline while idle, in core-seconds.
    pub wasted_cpu_s: f64,
    /// The lowest and highest host CPU of one sample, in % of one core.
    pub min_cpu_pct: Option<f64>,
    pub max_cpu_pct: Option<f64>,
}

impl Summary {
    /// Adds another stretch of the same guest.
    pub fn add(&mut self, other: &Summary) {
        self.samples += other.samples;
        self.length_s += other.length_s;
        self.vcpu_s += other.vcpu_s;
        self.host_cpu_s += other.host_cpu_s;
        self.wakeups += other.wakeups;
        self.idle_s += other.idle_s;
        self.busy_s += other.busy_s;
        self.wasted_cpu_s += other.wasted_cpu_s;
        let pick = |a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64| match (a, b) {
            (Some(a), Some(b)) => Some(f(a, b)),
            (a, b) => a.or(b),
        };
        self.min_cpu_pct = pick(self.min_cpu_pct, other.min_cpu_pct, f64::min);
        self.max_cpu_pct = pick(self.max_cpu_pct, other.max_cpu_pct, f64::max);
    }

    pub fn figures(&self) -> Figures {
        let judged_s = self.idle_s + self.busy_s;
        Figures {
            host_cpu_pct: (self.length_s > 0.0).then(|| 100.0 * self.host_cpu_s / self.length_s),
            wakeups_per_vcpu_s: (self.vcpu_s > 0.0).then(|| self.wakeups as f64 / self.vcpu_s),
            idle_share: (judged_s > 0.0).then(|| self.idle_s / judged_s),
            wasted_cpu_pct: if self.length_s > 0.0 {
                100.0 * self.wasted_cpu_s / self.length_s
            } else {
                0.0
            },
            length_s: self.length_s,
            idle_s: self.idle_s,
        }
    }

    pub fn accumulated(&self) -> Accumulated {
        Accumulated {
            wasted_core_hours: self.wasted_cpu_s / 3600.0,
            measured_hours: self.length_s / 3600.0,
            idle_hours: self.idle_s / 3600.0,
        }
    }
}

/// One window judged as the ranking judges the present, and priced against `baseline`.
pub fn summarise(window: &Window, baseline: &Baseline) -> Summary {
    let total = window.total();
    let activity = idle::activity(&window.intervals);
    let (span, reported_idle) = judged(&total, &activity);
    let classification = tick_mode::classify(window, &span, reported_idle);
    let activity = settled(activity, &classification, window);
    let waste = waste::waste(&classification, &activity, &total, baseline);
    let cpu_pcts = window
        .intervals
        .iter()
        .filter(|i| i.length_s > 0.0)
        .map(|i| 100.0 * i.host_cpu_s / i.length_s);
    Summary {
        samples: window.intervals.len() as i64,
        length_s: total.length_s,
        vcpu_s: total.vcpu_s,
        host_cpu_s: total.host_cpu_s,
        wakeups: i64::try_from(total.wakeups).unwrap_or(i64::MAX),
        idle_s: activity.idle_s,
        busy_s: activity.busy_s,
        wasted_cpu_s: waste.wasted_cpu_pct / 100.0 * total.length_s,
        min_cpu_pct: cpu_pcts.clone().min_by(f64::total_cmp),
        max_cpu_pct: cpu_pcts.max_by(f64::total_cmp),
    }
}

/// One window's figures.
pub fn figures(window: &Window, baseline: &Baseline) -> Figures {
    summarise(window, baseline).figures()
}

/// Sums the waste of consecutive windows of one guest.
pub fn accumulate(windows: &[Window], baseline: &Baseline) -> Accumulated {
    let mut sum = Summary::default();
    for window in windows {
        sum.add(&summarise(window, baseline));
    }
    sum.accumulated()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_window;

    #[test]
    fn waste_adds_up_over_windows_judged_each_on_its_own() {
        let baseline = Baseline {
            cpu_pct_per_vcpu: 0.5,
            learned_from_guests: 0,
        };
        // A minute ticking with nohz=off at 5.3 %, a minute tickless after its reboot, and a
        // minute of the ticking guest at work: only the first wastes, (5.3 − 0.5) % for 60 s.
        let ticking = test_window(1, 5.3, 650.0, Some("nohz=off"));
        let fixed = test_window(1, 0.4, 40.0, None);
        let working = test_window(1, 99.0, 650.0, Some("nohz=off"));
        let sum = accumulate(&[ticking, fixed, working], &baseline);
        let expected = 4.8 / 100.0 * 60.0 / 3600.0;
        assert!((sum.wasted_core_hours - expected).abs() < 1e-12, "{sum:?}");
        assert!((sum.measured_hours - 180.0 / 3600.0).abs() < 1e-12);
        // The working minute is not idle time, though nothing in it stood above a quieter floor.
        assert!((sum.idle_hours - 120.0 / 3600.0).abs() < 1e-12, "{sum:?}");
        assert_eq!(accumulate(&[], &baseline), Accumulated::default());
    }

    #[test]
    fn summed_windows_give_the_figures_of_their_sums() {
        let baseline = Baseline {
            cpu_pct_per_vcpu: 0.5,
            learned_from_guests: 0,
        };
        let ticking = summarise(&test_window(1, 5.3, 650.0, Some("nohz=off")), &baseline);
        let working = summarise(&test_window(1, 99.0, 650.0, Some("nohz=off")), &baseline);
        let mut both = ticking;
        both.add(&working);
        let f = both.figures();
        // 60 s at 5.3 % and 60 s at 99 %: 52.15 % of a core over the 120 s.
        assert!(
            (f.host_cpu_pct.unwrap() - (5.3 + 99.0) / 2.0).abs() < 1e-9,
            "{f:?}"
        );
        // 650 wake-ups per vCPU per second throughout.
        assert!((f.wakeups_per_vcpu_s.unwrap() - 650.0).abs() < 1e-9);
        // Only the idle minute wastes, (5.3 − 0.5) % for 60 s, averaged over 120 s.
        assert!((f.wasted_cpu_pct - 4.8 / 2.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.idle_share, Some(0.5));
        assert_eq!(both.samples, 12);
        assert!((both.min_cpu_pct.unwrap() - 5.3).abs() < 1e-9);
        assert!((both.max_cpu_pct.unwrap() - 99.0).abs() < 1e-9);
        // Adding nothing changes nothing; the order of adding does not matter.
        let mut again = working;
        again.add(&Summary::default());
        again.add(&ticking);
        assert_eq!(again, both);
        assert_eq!(Summary::default().figures().host_cpu_pct, None);
    }
}
