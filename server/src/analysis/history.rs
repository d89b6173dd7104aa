//! Waste accumulated over time: a guest's history cut into analysis windows, each judged the way
//! the ranking judges the present (idle intervals, tick mode from the facts of that time), and
//! priced against the host's current tickless baseline.

use serde::Serialize;

use super::waste::{self, Baseline};
use super::{Window, idle, judged, settled, tick_mode};

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

pub fn figures(window: &Window, baseline: &Baseline) -> Figures {
    let total = window.total();
    let activity = idle::activity(&window.intervals);
    let (span, reported_idle) = judged(&total, &activity);
    let classification = tick_mode::classify(window, &span, reported_idle);
    let activity = settled(activity, &classification, window);
    let waste = waste::waste(&classification, &activity, &total, baseline);
    let rates = total.rates();
    Figures {
        host_cpu_pct: rates.map(|r| r.host_cpu_pct),
        wakeups_per_vcpu_s: rates.map(|r| r.wakeups_per_vcpu_s),
        idle_share: activity.idle_share(),
        wasted_cpu_pct: waste.wasted_cpu_pct,
        length_s: total.length_s,
        idle_s: activity.idle_s,
    }
}

/// Sums the waste of consecutive windows of one guest.
pub fn accumulate(windows: &[Window], baseline: &Baseline) -> Accumulated {
    let mut sum = Accumulated::default();
    for window in windows {
        let f = figures(window, baseline);
        sum.wasted_core_hours += f.wasted_cpu_pct / 100.0 * f.length_s / 3600.0;
        sum.measured_hours += f.length_s / 3600.0;
        sum.idle_hours += f.idle_s / 3600.0;
    }
    sum
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
}
