//! One host's guests judged: rates, tick mode, waste and suggestions per guest.

use std::collections::HashMap;

use serde::Serialize;
use tickscope_wire::Hypervisor;

use super::cause::Cause;
use super::idle::Activity;
use super::suggest::Suggestion;
use super::tick_mode::{Classification, TickMode};
use super::waste::{Baseline, Waste};

use super::window::{CpuSplit, Rates, Span, Window};
use super::{attribution, idle, suggest, tick_mode, waste};

/// Everything the analysis concluded about one guest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Over every interval of the window: what the host saw.
    pub rates: Option<Rates>,
    /// Over the idle intervals only (all of them when none was idle): what the tick mode and the
    /// waste rest on.
    pub idle_rates: Option<Rates>,
    /// Where its host CPU went among the VM's threads over the same intervals as `idle_rates`,
    /// when the agent split it.
    pub split: Option<CpuSplit>,
    /// Host CPU KVM spent halt-polling its vCPUs over the same intervals, in % of a core, where
    /// the agent read KVM's counters.
    pub halt_poll_pct: Option<f64>,
    pub activity: Activity,
    pub classification: Classification,
    /// What it wastes: the tick's or polling's waste, or what the rules price to other causes
    /// (see [`attribution::attributed`]).
    pub waste: Waste,
    /// The cause it is filed under ([`attribution::main_cause`]); `None` when nothing is wrong.
    pub cause: Option<Cause>,
    pub suggestions: Vec<Suggestion>,
}

/// What a guest's tick is judged on: its idle intervals when they hold enough time to say
/// anything, else all of them (a guest busy the whole window is judged busy from all of it),
/// with the guest's own idle fraction over the same intervals when it reported one.
pub(crate) fn judged(total: &Span, activity: &Activity) -> (Span, Option<f64>) {
    if activity.idle.length_s >= tick_mode::MIN_WINDOW_S {
        (activity.idle, activity.reported_idle_when_idle)
    } else {
        (*total, activity.reported_idle_overall)
    }
}

/// The activity once the tick classifier has spoken: a guest it found working was not idle in the
/// intervals inferred idle only for lack of a quieter floor.
pub(crate) fn settled(
    activity: Activity,
    classification: &Classification,
    window: &Window,
) -> Activity {
    if classification.mode == TickMode::Busy && activity.inferred_s > 0.0 {
        idle::activity_inferred_busy(&window.intervals)
    } else {
        activity
    }
}

/// Analyses the guests of one host: judges each interval idle or busy, classifies each guest's
/// tick from its idle intervals, learns the host's tickless baseline per hypervisor family from
/// its own tickless guests, then prices each guest's idle time against it.
pub fn analyse_host(guests: &[Window]) -> Vec<Verdict> {
    struct Measured {
        total: Span,
        judged: Span,
        activity: Activity,
        classification: Classification,
    }
    let measured: Vec<Measured> = guests
        .iter()
        .map(|window| {
            let total = window.total();
            let activity = idle::activity(&window.intervals);
            let (judged, reported_idle) = judged(&total, &activity);
            let classification = tick_mode::classify(window, &judged, reported_idle);
            Measured {
                activity: settled(activity, &classification, window),
                classification,
                total,
                judged,
            }
        })
        .collect();
    // Each family's tickless guests teach the host's baseline for that family: learned once
    // per family, so the host's analysis stays linear in its guests.
    let mut peers: HashMap<Hypervisor, Vec<f64>> = HashMap::new();
    for (window, m) in guests.iter().zip(&measured) {
        // Measured as waste is: without the I/O threads and vhost workers, where split.
        if m.classification.mode == TickMode::Tickless
            && window.teaches_baseline()
            && m.judged.rates().is_some()
        {
            peers
                .entry(window.hypervisor)
                .or_default()
                .push(100.0 * m.judged.guest_cpu_s() / m.judged.vcpu_s);
        }
    }
    let baselines: HashMap<Hypervisor, Baseline> = peers
        .iter()
        .map(|(family, peers)| (*family, Baseline::learn(peers)))
        .collect();
    let no_peers = Baseline::learn(&[]);
    guests
        .iter()
        .zip(&measured)
        .map(|(window, m)| {
            let baseline = baselines.get(&window.hypervisor).unwrap_or(&no_peers);
            let waste = waste::waste(&m.classification, &m.activity, &m.total, baseline);
            let idle_rates = m.judged.rates();
            let split = m.judged.parts.split();
            let halt_poll_pct = m.judged.halt_poll_pct();
            let suggestions = suggest::suggest(&suggest::Input {
                window,
                rates: idle_rates.as_ref(),
                split: split.as_ref(),
                halt_poll_pct,
                activity: &m.activity,
                classification: &m.classification,
                waste: &waste,
            });
            let ceiling_pct = idle_cost_above_baseline_pct(&m.activity.idle, &m.total, baseline);
            let waste = attribution::attributed(waste, &suggestions, ceiling_pct);
            Verdict {
                rates: m.total.rates(),
                idle_rates,
                split,
                halt_poll_pct,
                activity: m.activity.clone(),
                classification: m.classification.clone(),
                waste,
                cause: attribution::main_cause(&suggestions),
                suggestions,
            }
        })
        .collect()
}

/// What a guest's idle intervals cost above the tickless baseline, averaged over all the
/// measured time as waste is, in % of a core: the most any cause can have wasted.
fn idle_cost_above_baseline_pct(idle: &Span, total: &Span, baseline: &Baseline) -> f64 {
    if total.length_s <= 0.0 {
        return 0.0;
    }
    let tickless_s = baseline.cpu_pct_per_vcpu / 100.0 * idle.vcpu_s;
    (100.0 * (idle.host_cpu_s - tickless_s) / total.length_s).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_window;
    use crate::growth::assert_not_super_linear;

    /// `n` guests on one host, half of them tickless (which the baseline learns from).
    fn host_of(n: usize) -> Vec<Window> {
        (0..n)
            .map(|i| match i % 2 {
                0 => test_window(1, 0.3, 38.0, None),
                _ => test_window(2, 8.6, 572.0, Some("console=ttyS0 nohz=off")),
            })
            .collect()
    }

    #[test]
    fn a_hosts_analysis_grows_no_faster_than_its_guests() {
        let (small, large) = (host_of(1_000), host_of(8_000));
        assert_not_super_linear(
            "analyse_host",
            || {
                std::hint::black_box(analyse_host(&small));
            },
            || {
                std::hint::black_box(analyse_host(&large));
            },
        );
    }

    #[test]
    fn each_guest_is_priced_against_its_own_familys_tickless_peers() {
        let mut guests = host_of(6);
        // Tickless VirtualBox guests at another idle cost than the QEMU ones.
        for w in &mut guests[..2] {
            w.hypervisor = tickscope_wire::Hypervisor::Virtualbox;
        }
        let verdicts = analyse_host(&guests);
        let learned: Vec<usize> = verdicts
            .iter()
            .map(|v| v.waste.baseline.learned_from_guests)
            .collect();
        // QEMU: guests 2 and 4 are tickless (two peers); VirtualBox: guest 0 alone (the default).
        assert_eq!(learned, [0, 0, 2, 2, 2, 2]);
    }
}
