//! Wasted idle CPU: what a ticking or polling guest costs beyond what the same guest would cost
//! tickless.
//!
//! The tickless cost per vCPU is learned per host and hypervisor family from that host's own
//! idle tickless guests (their median), because it depends on the host's CPU, the hypervisor and
//! its settings. Where a host has too few such guests, a stated default is used.

use serde::Serialize;

use super::Rates;
use super::tick_mode::{Classification, TickMode};

/// Tickless idle cost per vCPU when a host has no guests to learn it from, in % of a core.
/// Idle tickless TCG guests measured 0.1-0.4 % per vCPU on the reference machine (DESIGN.md §2);
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

/// Waste = host CPU − baseline × vCPUs, for guests that tick or poll while idle. A tickless
/// guest's CPU above the baseline is not the tick's doing, a busy guest's CPU is work, and an
/// unknown one has not been measured long enough: none of these count.
/// `guest_idle_fraction` is the guest's own count of its idle time, when it reported one.
pub fn waste(
    classification: &Classification,
    rates: Option<&Rates>,
    vcpus: u32,
    baseline: &Baseline,
    guest_idle_fraction: Option<f64>,
) -> Waste {
    let none = |reasoning: String| Waste {
        wasted_cpu_pct: 0.0,
        baseline: *baseline,
        reasoning,
    };
    let Some(rates) = rates else {
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
            let tickless_cost = baseline.cpu_pct_per_vcpu * f64::from(vcpus);
            let wasted = (rates.host_cpu_pct - tickless_cost).max(0.0);
            let idle = match guest_idle_fraction {
                Some(idle) => format!(
                    "The guest reports it was idle {:.0} % of the time, so this is the cost of idling.",
                    idle * 100.0
                ),
                None => "From the host side this includes any work the guest did meanwhile: it is an upper bound until the guest reports its own idle time.".into(),
            };
            Waste {
                wasted_cpu_pct: wasted,
                baseline: *baseline,
                reasoning: format!(
                    "{:.2} % used − {vcpus} vCPU(s) × {:.2} % = {wasted:.2} % of a core, against the {}. {idle}",
                    rates.host_cpu_pct,
                    baseline.cpu_pct_per_vcpu,
                    baseline.describe()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tick_mode::Confidence;

    fn classification(mode: TickMode) -> Classification {
        Classification {
            mode,
            estimated_hz: None,
            confidence: Confidence::Medium,
            evidence: vec![],
        }
    }

    fn rates(host_cpu_pct: f64) -> Rates {
        Rates {
            host_cpu_pct,
            cpu_pct_per_vcpu: host_cpu_pct,
            wakeups_per_vcpu_s: 0.0,
        }
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
            let w = waste(
                &classification(mode),
                Some(&rates(cpu)),
                vcpus,
                &baseline,
                None,
            );
            assert!(
                (w.wasted_cpu_pct - expected).abs() < 1e-9,
                "{mode:?} {cpu} % {vcpus} vCPU: {w:?}"
            );
            assert!(!w.reasoning.is_empty());
        }
        let w = waste(
            &classification(TickMode::Periodic),
            None,
            1,
            &baseline,
            None,
        );
        assert_eq!(w.wasted_cpu_pct, 0.0);
        // The guest's own idle count turns the upper bound into a statement.
        let w = waste(
            &classification(TickMode::Periodic),
            Some(&rates(5.3)),
            1,
            &baseline,
            Some(0.99),
        );
        assert!(
            w.reasoning.contains("idle 99 % of the time"),
            "{}",
            w.reasoning
        );
        let w = waste(
            &classification(TickMode::Periodic),
            Some(&rates(5.3)),
            1,
            &baseline,
            None,
        );
        assert!(w.reasoning.contains("upper bound"), "{}", w.reasoning);
    }
}
