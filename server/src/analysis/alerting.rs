//! Alert states, as Prometheus keeps them: a rule's condition holding for a subject opens a
//! pending alert; holding for the rule's whole duration makes it fire; no longer holding resolves
//! it (a pending one that never fired is simply dropped). Pure: the server evaluates, stores and
//! notifies.

use wildmatch::WildMatch;

/// An alert that is open for a (rule, subject).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Open {
    /// The condition holds since `active_ms`, for less than the rule's duration so far.
    Pending { active_ms: i64 },
    /// The condition held for the rule's duration; it fired at `fired_ms`.
    Firing { active_ms: i64, fired_ms: i64 },
}

/// What one evaluation does to a (rule, subject).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// No alert, and none needed.
    Inactive,
    /// The alert stays (or becomes) as given; when it becomes firing, that is a transition to
    /// notify.
    Keep(Open),
    /// The condition cleared before the alert fired: it is dropped, nobody is told.
    Cancel,
    /// The condition cleared after the alert fired: it is resolved, and that is notified.
    Resolve,
}

/// A transition that is notified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Firing,
    Resolved,
}

impl Transition {
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Firing => "firing",
            Transition::Resolved => "resolved",
        }
    }
}

/// The next state of a (rule, subject) whose alert was `open`, when the condition `holds` at
/// `now_ms`, for a rule that must hold `duration_ms` before it fires.
pub fn step(open: Option<Open>, holds: bool, now_ms: i64, duration_ms: i64) -> Step {
    let due = |active_ms: i64| now_ms - active_ms >= duration_ms;
    match (open, holds) {
        (None, false) => Step::Inactive,
        (None, true) if due(now_ms) => Step::Keep(Open::Firing {
            active_ms: now_ms,
            fired_ms: now_ms,
        }),
        (None, true) => Step::Keep(Open::Pending { active_ms: now_ms }),
        (Some(Open::Pending { active_ms }), true) if due(active_ms) => Step::Keep(Open::Firing {
            active_ms,
            fired_ms: now_ms,
        }),
        (Some(open), true) => Step::Keep(open),
        (Some(Open::Pending { .. }), false) => Step::Cancel,
        (Some(Open::Firing { .. }), false) => Step::Resolve,
    }
}

/// The transition a step makes from `open`, if it is one to notify.
pub fn transition(open: Option<Open>, step: Step) -> Option<Transition> {
    match (open, step) {
        (Some(Open::Firing { .. }), Step::Keep(Open::Firing { .. })) => None,
        (_, Step::Keep(Open::Firing { .. })) => Some(Transition::Firing),
        (_, Step::Resolve) => Some(Transition::Resolved),
        _ => None,
    }
}

/// Whether an open alert that neither changed state nor cause is written again at `now_ms` to
/// refresh its figures (the value and the annotations that quote it), when it was last written at
/// `written_ms`: once every `refresh_ms`, at a phase of its own drawn from its `id`, so that the
/// open alerts of a fleet are refreshed spread over the period and not all in one evaluation.
/// Its stored figures are at most `refresh_ms` plus one evaluation interval old. Rewriting every open alert at every evaluation held the database's write lock
/// for seconds at 100,000 guests, which every report waited behind.
pub fn refresh_due(id: i64, written_ms: i64, now_ms: i64, refresh_ms: i64) -> bool {
    if refresh_ms <= 0 {
        return true;
    }
    // Fibonacci hashing: consecutive ids land far apart in the period.
    let phase_ms = ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % refresh_ms as u64) as i64;
    let period = |ms: i64| (ms - phase_ms).div_euclid(refresh_ms);
    period(now_ms) > period(written_ms)
}

/// A `*` pattern matched against a name, ignoring case; an empty pattern matches anything.
pub fn matches(pattern: &str, name: &str) -> bool {
    pattern.is_empty() || WildMatch::new_case_insensitive(pattern).matches(name)
}

/// A silence as the evaluation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Silence {
    /// `None`: every rule.
    pub rule_id: Option<i64>,
    /// Matched against the subject's name and its host's name; empty matches anything.
    pub pattern: String,
    pub starts_ms: i64,
    pub ends_ms: i64,
}

/// Whether a notification about `subject` (on `host`) from `rule_id` is held back at `now_ms`.
pub fn silenced(
    silences: &[Silence],
    rule_id: i64,
    subject: &str,
    host: &str,
    now_ms: i64,
) -> bool {
    silences.iter().any(|s| {
        (s.starts_ms..s.ends_ms).contains(&now_ms)
            && s.rule_id.is_none_or(|r| r == rule_id)
            && (matches(&s.pattern, subject) || matches(&s.pattern, host))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    /// A recorded sequence: the condition at each minute, and the state and transition after it,
    /// for a rule with a 3-minute duration.
    #[test]
    fn pending_then_firing_only_after_the_duration_then_resolved() {
        use Open::*;
        /// (what, the condition each minute, the transitions told, the state at the end)
        type Case<'a> = (&'a str, &'a [bool], &'a [Option<Transition>], Option<Open>);
        let cases: &[Case] = &[
            ("never holds", &[false, false], &[None, None], None),
            (
                "holds for the duration, fires once",
                &[true, true, true, true, true],
                &[None, None, None, Some(Transition::Firing), None],
                Some(Firing {
                    active_ms: 0,
                    fired_ms: 3 * MIN,
                }),
            ),
            (
                "clears before the duration: never fires, nobody told",
                &[true, true, false, true],
                &[None, None, None, None],
                Some(Pending { active_ms: 3 * MIN }),
            ),
            (
                "fires, then clears: resolved once",
                &[true, true, true, true, false, false],
                &[
                    None,
                    None,
                    None,
                    Some(Transition::Firing),
                    Some(Transition::Resolved),
                    None,
                ],
                None,
            ),
        ];
        for (name, holds, expected, last) in cases {
            let mut open = None;
            let mut notified = Vec::new();
            for (minute, holds) in holds.iter().enumerate() {
                let s = step(open, *holds, minute as i64 * MIN, 3 * MIN);
                notified.push(transition(open, s));
                open = match s {
                    Step::Keep(o) => Some(o),
                    Step::Inactive | Step::Cancel | Step::Resolve => None,
                };
            }
            assert_eq!(&notified, expected, "{name}");
            assert_eq!(open, *last, "{name}");
        }
    }

    #[test]
    fn an_unchanged_alert_is_refreshed_once_a_period_at_its_own_phase() {
        const R: i64 = 60_000;
        let phase = |id: i64| ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % R as u64) as i64;
        let p = phase(7);
        // (written_ms, now_ms, refresh_ms, due)
        let cases = [
            // Within the period it was written in: not due, however close to its end.
            (p, p + 1, R, false),
            (p, p + R - 1, R, false),
            (p + 10, p + R - 1, R, false),
            // Its phase passed since it was written: due, even a moment after it.
            (p - 1, p, R, true),
            (p, p + R, R, true),
            (p + R - 1, p + R, R, true),
            // Written long ago, or the clock went back: due, and not due.
            (p - 10 * R, p, R, true),
            (p + R, p, R, false),
            // No refresh period: written every time.
            (p, p, 0, true),
        ];
        for (written_ms, now_ms, refresh_ms, due) in cases {
            assert_eq!(
                refresh_due(7, written_ms, now_ms, refresh_ms),
                due,
                "written {written_ms}, now {now_ms}, period {refresh_ms}"
            );
        }
        // Evaluated every 15 s, an alert is refreshed in exactly one evaluation of four, and a
        // thousand alerts written together are refreshed spread over the period's four
        // evaluations, about a quarter in each.
        let mut per_evaluation = [0; 4];
        for id in 1..=1000 {
            let mut written_ms = 0;
            let mut refreshed = Vec::new();
            for k in 0..4 {
                let now_ms = (k as i64 + 1) * 15_000;
                if refresh_due(id, written_ms, now_ms, R) {
                    written_ms = now_ms;
                    refreshed.push(k);
                }
            }
            assert_eq!(refreshed.len(), 1, "alert {id} refreshed in {refreshed:?}");
            per_evaluation[refreshed[0]] += 1;
        }
        for count in per_evaluation {
            assert!((200..=300).contains(&count), "{per_evaluation:?}");
        }
    }

    #[test]
    fn a_rule_without_duration_fires_at_once() {
        let s = step(None, true, 5, 0);
        assert_eq!(
            s,
            Step::Keep(Open::Firing {
                active_ms: 5,
                fired_ms: 5
            })
        );
        assert_eq!(transition(None, s), Some(Transition::Firing));
    }

    #[test]
    fn silences_match_by_rule_name_host_and_time() {
        let silence = |rule_id, pattern: &str| Silence {
            rule_id,
            pattern: pattern.into(),
            starts_ms: 100,
            ends_ms: 200,
        };
        let cases = [
            (silence(None, ""), 1, "web-01", "hv1", 150, true),
            (silence(Some(1), ""), 2, "web-01", "hv1", 150, false),
            (silence(Some(1), "WEB-*"), 1, "web-01", "hv1", 150, true),
            (silence(None, "db-*"), 1, "web-01", "hv1", 150, false),
            (silence(None, "hv1"), 1, "web-01", "hv1", 150, true),
            (silence(None, ""), 1, "web-01", "hv1", 99, false),
            (silence(None, ""), 1, "web-01", "hv1", 200, false),
        ];
        for (s, rule, subject, host, now, expected) in cases {
            assert_eq!(
                silenced(std::slice::from_ref(&s), rule, subject, host, now),
                expected,
                "{s:?} {rule} {subject} {now}"
            );
        }
    }
}
