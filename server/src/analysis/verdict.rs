//! One host's guests judged: rates, tick mode, waste and suggestions per guest.

use serde::Serialize;

use super::idle::Activity;
use super::suggest::Suggestion;
use super::tick_mode::{Classification, TickMode};
use super::waste::{Baseline, Waste};

use super::window::{Rates, Span, Window};
use super::{idle, suggest, tick_mode, waste};

/// Everything the analysis concluded about one guest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Over every interval of the window: what the host saw.
    pub rates: Option<Rates>,
    /// Over the idle intervals only (all of them when none was idle): what the tick mode and the
    /// waste rest on.
    pub idle_rates: Option<Rates>,
    pub activity: Activity,
    pub classification: Classification,
    pub waste: Waste,
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
    guests
        .iter()
        .zip(&measured)
        .map(|(window, m)| {
            let peers: Vec<f64> = guests
                .iter()
                .zip(&measured)
                .filter(|(w, p)| {
                    w.hypervisor == window.hypervisor && p.classification.mode == TickMode::Tickless
                })
                .filter_map(|(_, p)| p.judged.rates().map(|r| r.cpu_pct_per_vcpu))
                .collect();
            let baseline = Baseline::learn(&peers);
            let waste = waste::waste(&m.classification, &m.activity, &m.total, &baseline);
            let idle_rates = m.judged.rates();
            let suggestions = suggest::suggest(&suggest::Input {
                window,
                rates: idle_rates.as_ref(),
                activity: &m.activity,
                classification: &m.classification,
                waste: &waste,
            });
            Verdict {
                rates: m.total.rates(),
                idle_rates,
                activity: m.activity.clone(),
                classification: m.classification.clone(),
                waste,
                suggestions,
            }
        })
        .collect()
}
