//! Whether a guest may be changed now: the check a playbook makes before it touches a guest,
//! answered from what the server knows. A change is made to a guest that still has it among its
//! suggestions (the plan was made from them; a guest changed since, or busy since, no longer
//! does), that is idle now (changing a working guest interrupts its work, and its figures would
//! not show what the change did), and that reports now (otherwise neither is known).

use serde::Serialize;

use super::suggestion::Suggestion;
use super::tick_mode::TickMode;

/// The shortest share of its window a guest must have idled to be changed, 0 to 1.
pub const MIN_IDLE_SHARE: f64 = 0.8;
/// The longest a guest may have been silent and still be judged, in ms: a few report
/// intervals, so that a host whose agent stopped is not changed on old figures.
pub const MAX_SILENCE_MS: i64 = 3 * 60 * 1000;

/// What the check looks at of the guest.
#[derive(Debug, Clone, Copy)]
pub struct GuestNow<'a> {
    pub suggestions: &'a [Suggestion],
    pub mode: TickMode,
    /// Share of its window it idled; `None` with nothing measured.
    pub idle_share: Option<f64>,
    /// How long ago its last report arrived, in ms.
    pub silent_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// Whether the change may be made now: all three below.
    pub ready: bool,
    /// It still has the change among its suggestions.
    pub in_plan: bool,
    /// It idles now.
    pub idle: bool,
    /// Its host reports it now.
    pub reporting: bool,
    /// Why, in a sentence: what a playbook prints when it refuses.
    pub reason: String,
}

/// Whether `rule`'s change may be made to the guest now, and why (not).
pub fn readiness(rule: &str, guest: &GuestNow) -> Readiness {
    let in_plan = guest.suggestions.iter().any(|s| s.rule == rule);
    let reporting = guest.silent_ms <= MAX_SILENCE_MS;
    let idle =
        guest.mode != TickMode::Busy && guest.idle_share.is_some_and(|s| s >= MIN_IDLE_SHARE);
    let mut refusals = Vec::new();
    if !in_plan {
        refusals.push(match rules_of(guest.suggestions) {
            None => format!("it no longer needs {rule}: nothing is suggested for it now"),
            Some(now) => format!("it no longer needs {rule}: what is suggested now is {now}"),
        });
    }
    if !reporting {
        refusals.push(format!(
            "its host has not reported it for {} s, so whether it idles is not known",
            guest.silent_ms / 1000
        ));
    } else if !idle {
        refusals.push(match guest.idle_share {
            _ if guest.mode == TickMode::Busy => {
                "it is working: judged busy over its last window".to_string()
            }
            Some(share) => format!(
                "it is working: idle {:.0} % of its last window (a change needs {:.0} %)",
                100.0 * share,
                100.0 * MIN_IDLE_SHARE
            ),
            None => "it has not been measured long enough to say whether it idles".into(),
        });
    }
    let ready = refusals.is_empty();
    Readiness {
        ready,
        in_plan,
        idle,
        reporting,
        reason: if ready {
            format!("ready: {rule} is suggested for it, it idles and its host reports it")
        } else {
            format!("not now: {}", refusals.join("; "))
        },
    }
}

/// The rules of `suggestions`, as a list to read (`remove_nohz_off, disable_hpet`); `None` for
/// none: what a refusal names as the guest's suggestions now.
pub fn rules_of(suggestions: &[Suggestion]) -> Option<String> {
    let rules: Vec<&str> = suggestions.iter().map(|s| s.rule).collect();
    (!rules.is_empty()).then(|| rules.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::cause::Cause;
    use crate::analysis::change_kind::ChangeKind;
    use crate::analysis::tick_mode::Confidence;

    fn suggestion(rule: &'static str) -> Suggestion {
        Suggestion {
            rule,
            cause: Cause::TickingKernel,
            kind: ChangeKind::BootParameter,
            title: "t",
            change: String::new(),
            why: String::new(),
            confidence: Confidence::High,
            saving_cpu_pct: Some(1.0),
        }
    }

    #[test]
    fn a_guest_is_changed_only_while_planned_idle_and_reported() {
        let nohz = [suggestion("remove_nohz_off")];
        let hpet = [suggestion("disable_hpet")];
        // (suggestions, mode, idle share, silent ms, ready, in plan, idle, reporting, reason has)
        type Case<'a> = (
            &'a [Suggestion],
            TickMode,
            Option<f64>,
            i64,
            bool,
            bool,
            bool,
            bool,
            &'a str,
        );
        let cases: [Case; 7] = [
            (
                &nohz,
                TickMode::Periodic,
                Some(1.0),
                10_000,
                true,
                true,
                true,
                true,
                "ready",
            ),
            (
                &hpet,
                TickMode::Periodic,
                Some(1.0),
                10_000,
                false,
                false,
                true,
                true,
                "suggested now is disable_hpet",
            ),
            (
                &[],
                TickMode::Tickless,
                Some(1.0),
                10_000,
                false,
                false,
                true,
                true,
                "nothing is suggested",
            ),
            (
                &nohz,
                TickMode::Busy,
                Some(0.9),
                10_000,
                false,
                true,
                false,
                true,
                "working",
            ),
            (
                &nohz,
                TickMode::Periodic,
                Some(0.5),
                10_000,
                false,
                true,
                false,
                true,
                "idle 50 %",
            ),
            (
                &nohz,
                TickMode::Periodic,
                None,
                10_000,
                false,
                true,
                false,
                true,
                "not been measured",
            ),
            (
                &nohz,
                TickMode::Periodic,
                Some(1.0),
                MAX_SILENCE_MS + 1,
                false,
                true,
                true,
                false,
                "not reported it for 180 s",
            ),
        ];
        for (suggestions, mode, idle_share, silent_ms, ready, in_plan, idle, reporting, has) in
            cases
        {
            let r = readiness(
                "remove_nohz_off",
                &GuestNow {
                    suggestions,
                    mode,
                    idle_share,
                    silent_ms,
                },
            );
            assert_eq!(
                (r.ready, r.in_plan, r.idle, r.reporting),
                (ready, in_plan, idle, reporting),
                "{r:?}"
            );
            assert!(r.reason.contains(has), "{r:?} lacks {has:?}");
        }
    }
}
