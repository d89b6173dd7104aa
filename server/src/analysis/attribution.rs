//! A guest's verdict once its suggestions have named their causes: the cause it is filed under,
//! and the waste it is ranked by, which counts what each cause's rule priced and not only what
//! the tick wastes.

use super::cause::Cause;
use super::suggestion::Suggestion;
use super::tick_mode::Confidence;
use super::waste::Waste;

/// The suggestion a guest is filed under: the one that saves the most (the first of those in
/// the rules' order on a tie), else, where none is priced, the first one at least of medium
/// confidence (one that says what to look at). `None` when nothing is suggested, or only
/// guesses (a busy guest's "check whether it polls").
pub fn main_suggestion(suggestions: &[Suggestion]) -> Option<&Suggestion> {
    let priced = suggestions
        .iter()
        .filter(|s| s.saving_cpu_pct.is_some_and(|pct| pct > 0.0))
        // max_by keeps the last of equals: reversed, the first in the rules' order.
        .rev()
        .max_by(|a, b| {
            a.saving_cpu_pct
                .unwrap()
                .total_cmp(&b.saving_cpu_pct.unwrap())
        });
    priced.or_else(|| {
        suggestions
            .iter()
            .find(|s| s.confidence >= Confidence::Medium)
    })
}

/// The cause a guest is filed under: its [`main_suggestion`]'s.
pub fn main_cause(suggestions: &[Suggestion]) -> Option<Cause> {
    main_suggestion(suggestions).map(|s| s.cause)
}

/// The host CPU a guest wastes once its suggestions have named their causes, in % of a core:
/// what its tick or polling wastes (`tick_waste_pct`, its vCPUs and emulator above the
/// tickless baseline), or more where a rule prices more of its vCPUs' idle cost to a cause of
/// its own (Windows timers, measured halt-polling, an emulated timer, a program's timer); plus
/// what its I/O threads waste, which the tick's figure leaves out. Never more than its whole
/// idle cost above the baseline (`ceiling_pct`), so two rules blaming the same CPU do not count
/// it twice.
pub fn attributed_waste_pct(
    tick_waste_pct: f64,
    suggestions: &[Suggestion],
    ceiling_pct: f64,
) -> f64 {
    let saving = |s: &Suggestion| s.saving_cpu_pct.unwrap_or(0.0).max(0.0);
    let vcpus = suggestions
        .iter()
        .filter(|s| !s.cause.outside_the_vcpus())
        .map(saving)
        .fold(tick_waste_pct, f64::max);
    let others: f64 = suggestions
        .iter()
        .filter(|s| s.cause.outside_the_vcpus())
        .map(saving)
        .sum();
    let attributed = vcpus + others;
    // The tick's own figure stands whatever the ceiling: it is measured the same way.
    if attributed > tick_waste_pct {
        attributed.min(ceiling_pct.max(tick_waste_pct))
    } else {
        tick_waste_pct
    }
}

/// `waste` as its suggestions price it ([`attributed_waste_pct`]), its reasoning saying what
/// was added to the tick's figure and by which causes.
pub fn attributed(waste: Waste, suggestions: &[Suggestion], ceiling_pct: f64) -> Waste {
    let pct = attributed_waste_pct(waste.wasted_cpu_pct, suggestions, ceiling_pct);
    if pct <= waste.wasted_cpu_pct {
        return waste;
    }
    let priced: Vec<String> = suggestions
        .iter()
        .filter_map(|s| {
            let saving = s.saving_cpu_pct.filter(|pct| *pct > 0.0)?;
            Some(format!("{} {saving:.2} % ({})", s.cause.label(), s.rule))
        })
        .collect();
    Waste {
        wasted_cpu_pct: pct,
        reasoning: format!(
            "{} Its causes are priced by their own rules: {}; counted as waste, {pct:.2} % of a core (at most its {ceiling_pct:.2} % above the baseline while idle).",
            waste.reasoning,
            priced.join(", ")
        ),
        ..waste
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::cause::Cause;
    use crate::analysis::change_kind::ChangeKind;

    fn s(cause: Cause, confidence: Confidence, saving: Option<f64>) -> Suggestion {
        Suggestion {
            rule: "test",
            cause,
            title: "test",
            change: String::new(),
            kind: ChangeKind::Investigate,
            why: String::new(),
            confidence,
            saving_cpu_pct: saving,
        }
    }

    #[test]
    fn the_main_cause_is_the_largest_saving_else_the_first_sure_enough() {
        use Cause::*;
        use Confidence::*;
        let cases: [(Vec<Suggestion>, Option<Cause>); 7] = [
            (vec![], None),
            (vec![s(GuestPolling, Low, None)], None),
            (vec![s(GuestPrograms, Medium, None)], Some(GuestPrograms)),
            (
                vec![
                    s(TickingKernel, High, Some(2.0)),
                    s(HostHaltPolling, High, Some(3.0)),
                ],
                Some(HostHaltPolling),
            ),
            (
                vec![
                    s(TickingKernel, High, Some(2.0)),
                    s(TickingKernel, Low, Some(1.0)),
                    s(VmThreads, Low, None),
                ],
                Some(TickingKernel),
            ),
            // On a tie, the first in the rules' order.
            (
                vec![
                    s(EmulatedTimer, Medium, Some(2.0)),
                    s(TickingKernel, High, Some(2.0)),
                ],
                Some(EmulatedTimer),
            ),
            // A saving of nothing prices nothing.
            (
                vec![s(TickingKernel, Low, Some(0.0)), s(VmThreads, Medium, None)],
                Some(VmThreads),
            ),
        ];
        for (suggestions, expected) in cases {
            assert_eq!(main_cause(&suggestions), expected, "{suggestions:?}");
        }
    }

    #[test]
    fn waste_takes_the_largest_vcpu_cause_plus_the_other_threads_within_the_ceiling() {
        use Cause::*;
        use Confidence::*;
        // (tick waste, suggestions, ceiling, expected)
        let cases: [(f64, Vec<Suggestion>, f64, f64); 6] = [
            (0.0, vec![], 10.0, 0.0),
            (4.0, vec![s(TickingKernel, High, Some(4.0))], 10.0, 4.0),
            // A tickless Windows guest on emulated timers wastes what its timers cost.
            (0.0, vec![s(WindowsTimers, Medium, Some(30.0))], 35.0, 30.0),
            // Halt-polling measured in a ticking guest is part of the same vCPU time.
            (
                4.0,
                vec![
                    s(TickingKernel, High, Some(4.0)),
                    s(HostHaltPolling, High, Some(3.0)),
                ],
                10.0,
                4.0,
            ),
            // I/O threads polling add to the tick's waste, which leaves them out...
            (
                4.0,
                vec![
                    s(TickingKernel, High, Some(4.0)),
                    s(VmThreads, Medium, Some(2.0)),
                ],
                10.0,
                6.0,
            ),
            // ... but never past the whole idle cost above the baseline.
            (
                0.0,
                vec![
                    s(WindowsTimers, Medium, Some(30.0)),
                    s(VmThreads, Medium, Some(8.0)),
                ],
                33.0,
                33.0,
            ),
        ];
        for (tick, suggestions, ceiling, expected) in cases {
            let got = attributed_waste_pct(tick, &suggestions, ceiling);
            assert!(
                (got - expected).abs() < 1e-9,
                "{suggestions:?}: {got} != {expected}"
            );
        }
    }
}
