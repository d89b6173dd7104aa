//! Recorded changes as the guest page and the plan page show them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::view;
use crate::analysis::change_kind::ChangeKind;
use crate::analysis::plan;
use crate::domain::GuestId;
use crate::fleet::AnalysedGuest;
use crate::fleet::change_records::{Outcome, RecordedChange, tally};

/// One recorded change, in words.
pub struct RecordedLine {
    pub guest_id: i64,
    pub guest: String,
    pub when: String,
    pub title: String,
    pub by: String,
    /// The token that recorded it, or "a token since revoked".
    pub recorded_with: String,
    pub note: String,
    pub projected: String,
    /// What it did: measured, measuring so far, or not enough idle time.
    pub outcome: String,
    /// `measured`, `measuring` or `not_enough_idle_time`, for the badge's class.
    pub state: &'static str,
}

impl RecordedLine {
    pub fn new(c: &RecordedChange, guest_name: &str, now_ms: i64) -> RecordedLine {
        let r = &c.record;
        let saved = |c: &crate::analysis::change::Change| {
            format!(
                "saved {} of a core ({} → {} while idle, {} → {} wake-ups/vCPU/s)",
                view::pct(c.saved_cpu_pct),
                view::pct(c.cpu_before_pct),
                view::pct(c.cpu_after_pct),
                view::rate(c.wakeups_before),
                view::rate(c.wakeups_after)
            )
        };
        let (outcome, state) = match (c.outcome, &c.measured) {
            (Outcome::Measured, Some(m)) => (saved(m), "measured"),
            (Outcome::Measuring, Some(m)) => (format!("so far {}", saved(m)), "measuring"),
            (Outcome::Measuring, None) => (
                "measuring: the hour after the change is not over".into(),
                "measuring",
            ),
            _ => (
                "not enough idle time before and after it to judge".into(),
                "not_enough_idle_time",
            ),
        };
        RecordedLine {
            guest_id: r.guest_id.0,
            guest: guest_name.to_string(),
            when: format!(
                "{} ({})",
                view::time(r.made_at_ms),
                view::ago(r.made_at_ms, now_ms)
            ),
            title: r.title.clone(),
            by: r.made_by.clone(),
            recorded_with: r
                .token_name
                .clone()
                .unwrap_or_else(|| "a token since deleted".into()),
            note: r.note.clone(),
            projected: r.projected_cpu_pct.map_or("–".into(), view::pct),
            outcome,
            state,
        }
    }
}

/// One change of the plan: how many guests still need it, how many have it made, and what those
/// measured saved against what was projected for them.
pub struct TallyLine {
    pub title: String,
    pub rule: String,
    pub pending: usize,
    pub made: usize,
    pub measured: usize,
    pub projected: String,
    pub saved: String,
}

/// Each change the plan holds or a record names, most made first: the guests the plan schedules
/// it for that have no record of it yet are pending.
pub fn tallies(guests: &[Arc<AnalysedGuest>], changes: &[RecordedChange]) -> Vec<TallyLine> {
    let recorded: HashSet<(GuestId, &str)> = changes
        .iter()
        .map(|c| (c.record.guest_id, c.record.rule.as_str()))
        .collect();
    let mut pending: HashMap<&str, (usize, &str)> = HashMap::new();
    for g in guests {
        if let Some(s) = plan::planned(&g.verdict.suggestions)
            && s.kind != ChangeKind::Investigate
            && !recorded.contains(&(g.id, s.rule))
        {
            pending.entry(s.rule).or_insert((0, s.title)).0 += 1;
        }
    }
    let titles: HashMap<&str, &str> = changes
        .iter()
        .map(|c| (c.record.rule.as_str(), c.record.title.as_str()))
        .collect();
    let tallied = tally(changes);
    let rules: BTreeMap<&str, ()> = pending
        .keys()
        .copied()
        .chain(tallied.keys().map(String::as_str))
        .map(|r| (r, ()))
        .collect();
    let mut lines: Vec<TallyLine> = rules
        .into_keys()
        .map(|rule| {
            let t = tallied.get(rule).copied().unwrap_or_default();
            let (pending, title) = pending.get(rule).copied().unwrap_or((0, ""));
            TallyLine {
                title: titles.get(rule).copied().unwrap_or(title).to_string(),
                rule: rule.to_string(),
                pending,
                made: t.made,
                measured: t.measured,
                projected: view::pct(t.projected_cpu_pct),
                saved: view::pct(t.saved_cpu_pct),
            }
        })
        .collect();
    lines.sort_by(|a, b| {
        b.made
            .cmp(&a.made)
            .then(b.pending.cmp(&a.pending))
            .then(a.rule.cmp(&b.rule))
    });
    lines
}
