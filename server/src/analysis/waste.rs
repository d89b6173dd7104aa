//! Wasted idle CPU: what a ticking or polling guest costs beyond what the same guest would cost
//! tickless.
//!
//! The tickless cost per vCPU is learned per host and hypervisor family from that host's own
//! idle tickless guests (their median), because it depends on the host's CPU, the hypervisor and
//! its settings. Where a host has too few such guests, a stated default is used.

use serde::Serialize;

use super::idle::Activity;
use super::tick_mode::{Classification, TickMode};
use super::window::Span;

/// Tickless idle cost per vCPU when a host has no guests to learn it from, in % of a core.
/// Idle tickless TCG guests measured 0.1-0.4 % per vCPU on the reference machine (docs/measurements.md);
/// KVM guests cost less. Erring high keeps the waste figure conservative.
pub const DEFAULT_BASELINE_CPU_PCT_PER_VCPU: f64 = 0.5;
/// Tickless guests needed on a host before its baseline is learned rather than defaulted.
pub const MIN_GUESTS_TO_LEARN: usize = 2;
/// Tickless guests above this per-vCPU cost are doing work, not idling, and are left out of the
/// baseline, in % of a core.
pub const MAX_IDLE_CPU_PCT_PER_VCPU: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Baseline {
    /// Host CPU an idle tickless vCPU costs, in % of a core.
    pub cpu_pct_per_vcpu: f64,
    /// How many of this host's tickless guests it was learned from; 0 for the default.
    pub learned_from_guests: usize,
}

impl Baseline {
    /// The median per-vCPU cost of a host's idle tickless guests, or the default.
    pub fn learn(tickless_cpu_pct_per_vcpu: &[f64]) -> Baseline {
        let mut idle: Vec<f64> = tickless_cpu_pct_per_vcpu
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v >= 0.0 && *v <= MAX_IDLE_CPU_PCT_PER_VCPU)
            .collect();
        if idle.len() < MIN_GUESTS_TO_LEARN {
            return Baseline {
                cpu_pct_per_vcpu: DEFAULT_BASELINE_CPU_PCT_PER_VCPU,
                learned_from_guests: 0,
            };
        }
        idle.sort_by(f64::total_cmp);
        let mid = idle.len() / 2;
        let median = if idle.len().is_multiple_of(2) {
            (idle[mid - 1] + idle[mid]) / 2.0
        } else {
            idle[mid]
        };
        Baseline {
            cpu_pct_per_vcpu: median,
            learned_from_guests: idle.len(),
        }
    }

    pub fn describe(&self) -> String {
        if self.learned_from_guests == 0 {
            format!(
                "default tickless baseline of {:.2} % of a core per vCPU (this host has fewer than {MIN_GUESTS_TO_LEARN} idle tickless guests of this hypervisor to learn from)",
                self.cpu_pct_per_vcpu
            )
        } else {
            format!(
                "tickless baseline of {:.2} % of a core per vCPU, the median of this host's {} idle tickless guest(s) of this hypervisor",
                self.cpu_pct_per_vcpu, self.learned_from_guests
            )
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waste {
    /// Host CPU wasted, in % of one core; never negative.
    pub wasted_cpu_pct: f64,
    pub baseline: Baseline,
    /// How the figure was reached, in words and numbers.
    pub reasoning: String,
}

/// Waste = host CPU used while idle − baseline × vCPU time while idle, never negative, for
/// guests that tick or poll while idle, averaged over all the measured time (busy intervals add
/// nothing: their CPU is work). A tickless guest's CPU above the baseline is not the tick's
/// doing, a busy guest's CPU is work, and an unknown one has not been measured long enough: none
/// of these count.
pub fn waste(
    classification: &Classification,
    activity: &Activity,
    total: &Span,
    baseline: &Baseline,
) -> Waste {
    let none = |reasoning: String| Waste {
        wasted_cpu_pct: 0.0,
        baseline: *baseline,
        reasoning,
    };
    let Some(rates) = total.rates() else {
        return none("Nothing measured yet.".into());
    };
    match classification.mode {
        TickMode::Busy => none(format!(
            "Counted as busy, so its {:.1} % of a core is taken as work, not idle waste.",
            rates.host_cpu_pct
        )),
        TickMode::Unknown => none("Not measured long enough to judge.".into()),
        TickMode::Tickless => none(format!(
            "Tickless: its tick stops when idle, so none of its {:.2} % of a core is tick waste; anything above the {} is work or user-space activity.",
            rates.host_cpu_pct,
            baseline.describe()
        )),
        TickMode::Periodic | TickMode::Polling => {
            let idle = &activity.idle;
            let Some(idle_rates) = idle.rates() else {
                return none(format!(
                    "It was never idle in the {:.0} s measured, so none of its CPU counts as waste. {}",
                    total.length_s,
                    activity.describe()
                ));
            };
            let tickless_cost_s = baseline.cpu_pct_per_vcpu / 100.0 * idle.vcpu_s;
            // The VM's I/O threads and vhost workers are not the tick's: where the agent split
            // the CPU, they are left out (rules of their own judge them).
            let guest_cpu_s = idle.guest_cpu_s();
            let wasted_s = (guest_cpu_s - tickless_cost_s).max(0.0);
            let wasted = 100.0 * wasted_s / total.length_s;
            let vcpus = idle.vcpu_s / idle.length_s;
            let busy = if activity.busy_s > 0.0 {
                format!(
                    " Averaged over all {:.0} s measured (busy intervals add nothing), that is {wasted:.2} % of a core.",
                    total.length_s
                )
            } else {
                String::new()
            };
            let left_out_s = idle.host_cpu_s - guest_cpu_s;
            let guest_pct = idle_rates.host_cpu_pct * guest_cpu_s / idle.host_cpu_s.max(1e-12);
            let left_out = if left_out_s > 0.0 {
                format!(
                    " (its I/O threads' and vhost workers' {:.2} % left out)",
                    100.0 * left_out_s / idle.length_s
                )
            } else {
                String::new()
            };
            Waste {
                wasted_cpu_pct: wasted,
                baseline: *baseline,
                reasoning: format!(
                    "While idle it used {guest_pct:.2} % of a core{left_out} − {vcpus:.0} vCPU(s) × {:.2} % = {:.2} % of a core, against the {}.{busy} {}",
                    baseline.cpu_pct_per_vcpu,
                    (guest_pct - vcpus * baseline.cpu_pct_per_vcpu).max(0.0),
                    baseline.describe(),
                    activity.describe()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::idle::activity;
    use crate::analysis::tick_mode::Confidence;
    use crate::analysis::window::Interval;

    fn classification(mode: TickMode) -> Classification {
        Classification {
            mode,
            estimated_hz: None,
            confidence: Confidence::Medium,
            evidence: vec![],
        }
    }

    /// A minute of 10 s intervals at these host CPU levels (% of a core, whole VM), with the
    /// guest's own idle fractions where given.
    fn measured(vcpus: u32, levels: &[(f64, Option<f64>)]) -> (Activity, Span) {
        let intervals: Vec<Interval> = levels
            .iter()
            .map(|&(cpu_pct, reported)| Interval {
                length_s: 10.0,
                vcpus,
                host_cpu_s: cpu_pct / 10.0,
                wakeups: 0,
                guest_idle_fraction: reported,
                parts: None,
                halt_poll_s: None,
            })
            .collect();
        (activity(&intervals), Span::of(&intervals))
    }

    #[test]
    fn baseline_is_the_median_of_idle_tickless_guests_or_the_default() {
        let cases: [(&[f64], f64, usize); 6] = [
            (&[], DEFAULT_BASELINE_CPU_PCT_PER_VCPU, 0),
            (&[0.3], DEFAULT_BASELINE_CPU_PCT_PER_VCPU, 0),
            (&[0.3, 0.1], 0.2, 2),
            (&[0.4, 0.1, 0.2], 0.2, 3),
            // A tickless guest doing real work is not an idle baseline.
            (&[0.2, 0.3, 40.0], 0.25, 2),
            (&[f64::NAN, 0.2, -1.0], DEFAULT_BASELINE_CPU_PCT_PER_VCPU, 0),
        ];
        for (peers, expected, learned) in cases {
            let b = Baseline::learn(peers);
            assert!(
                (b.cpu_pct_per_vcpu - expected).abs() < 1e-9,
                "{peers:?}: {b:?}"
            );
            assert_eq!(b.learned_from_guests, learned, "{peers:?}");
        }
    }

    #[test]
    fn waste_is_cpu_above_the_baseline_for_idle_guests_only() {
        let baseline = Baseline {
            cpu_pct_per_vcpu: 0.5,
            learned_from_guests: 0,
        };
        let cases = [
            (TickMode::Periodic, 5.3, 1, 4.8),
            (TickMode::Periodic, 8.6, 2, 7.6),
            (TickMode::Polling, 99.3, 1, 98.8),
            (TickMode::Tickless, 0.3, 1, 0.0),
            // A tickless guest that works is not wasting anything on its tick.
            (TickMode::Tickless, 30.0, 2, 0.0),
            (TickMode::Periodic, 0.4, 1, 0.0),
            (TickMode::Busy, 99.3, 1, 0.0),
            (TickMode::Unknown, 12.0, 1, 0.0),
        ];
        for (mode, cpu, vcpus, expected) in cases {
            let (activity, total) = measured(vcpus, &[(cpu, None); 6]);
            let w = waste(&classification(mode), &activity, &total, &baseline);
            assert!(
                (w.wasted_cpu_pct - expected).abs() < 1e-9,
                "{mode:?} {cpu} % {vcpus} vCPU: {w:?}"
            );
            assert!(!w.reasoning.is_empty());
        }
        let (activity, total) = measured(1, &[]);
        let w = waste(
            &classification(TickMode::Periodic),
            &activity,
            &total,
            &baseline,
        );
        assert_eq!(w.wasted_cpu_pct, 0.0);
    }

    #[test]
    fn busy_intervals_add_no_waste() {
        let baseline = Baseline {
            cpu_pct_per_vcpu: 0.5,
            learned_from_guests: 0,
        };
        let periodic = classification(TickMode::Periodic);
        // (intervals: host CPU % and the guest's idle fraction, waste averaged over the minute)
        type Case<'a> = (&'a [(f64, Option<f64>)], f64);
        let cases: [Case; 5] = [
            // Idle all minute, judged from the host: (5.3 − 0.5) every interval.
            (&[(5.3, None); 6], 4.8),
            // Two intervals of work (inferred): only the four idle ones count, over 60 s.
            (
                &[
                    (5.3, None),
                    (70.0, None),
                    (90.0, None),
                    (5.3, None),
                    (5.3, None),
                    (5.3, None),
                ],
                4.8 * 4.0 / 6.0,
            ),
            // The guest says it was working in half the intervals, though the host saw no rise.
            (
                &[
                    (5.3, Some(0.99)),
                    (5.3, Some(0.2)),
                    (5.3, Some(0.99)),
                    (5.3, Some(0.2)),
                    (5.3, Some(0.99)),
                    (5.3, Some(0.2)),
                ],
                2.4,
            ),
            // Busy all the time by its own account: nothing is waste.
            (&[(5.3, Some(0.1)); 6], 0.0),
            // Idle below the baseline: never negative.
            (&[(0.2, None); 6], 0.0),
        ];
        for (levels, expected) in cases {
            let (activity, total) = measured(1, levels);
            let w = waste(&periodic, &activity, &total, &baseline);
            assert!(
                (w.wasted_cpu_pct - expected).abs() < 1e-9,
                "{levels:?}: {} {}",
                w.wasted_cpu_pct,
                w.reasoning
            );
        }
        let (activity, total) = measured(
            1,
            &[
                (5.3, Some(0.99)),
                (80.0, None),
                (5.3, None),
                (5.3, None),
                (5.3, None),
                (5.3, None),
            ],
        );
        let w = waste(&periodic, &activity, &total, &baseline);
        assert!(
            w.reasoning.contains("busy intervals add nothing"),
            "{}",
            w.reasoning
        );
        assert!(
            w.reasoning.contains("guest's own idle time"),
            "{}",
            w.reasoning
        );
    }
}
