//! One evaluation: every rule stepped for every subject it watches, the new states written with
//! the notifications they send (each alert with its own, a few hundred alerts a transaction).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::context::AlertContext;
use super::labels::{LabelSet, parse_set, set_json};
use super::measure::{Measure, guest_measure, host_measure};
use super::rules::{Rule, RuleKind, silences_in_force};
use super::webhook::Notice;
use crate::analysis::alerting::{self, Open, Step};
use crate::db::{
    AlertResolution, AlertRow, AlertUpdate, AlertWrite, NewAlert, ReceiverRow, RuleRow,
};
use crate::domain::{AlertState, RuleId, Subject};
use crate::error::AppResult;
use axum::extract::FromRef;

/// The label set of a new alert of `rule` about `m`.
pub(super) fn alert_labels(rule: &RuleRow, m: &Measure) -> LabelSet {
    let mut set = LabelSet::new();
    set.insert("alertname".into(), rule.settings.name.clone());
    set.insert("severity".into(), rule.settings.severity.clone());
    set.insert("rule_id".into(), rule.id.to_string());
    for (name, value) in &m.labels {
        set.insert((*name).into(), value.clone());
    }
    set
}

/// The annotations of `m` under `rule`: its summary, a description with the value and the
/// threshold, and for guests the suggestion, the tick mode and the cause as judged now.
pub(super) fn annotations(rule: &Rule, m: &Measure) -> LabelSet {
    let mut set = LabelSet::new();
    set.insert("summary".into(), m.summary.clone());
    set.insert(
        "description".into(),
        format!(
            "{}: {} {} (threshold {} {}, for {} s).",
            rule.row.settings.name,
            format_value(m.value),
            rule.kind.unit(),
            format_value(rule.row.settings.threshold),
            rule.kind.unit(),
            rule.row.settings.duration_s
        ),
    );
    if let Some(s) = &m.suggestion {
        set.insert("suggestion".into(), s.clone());
    }
    if let Some(mode) = &m.tick_mode {
        set.insert("tick_mode".into(), mode.clone());
    }
    if let Some(cause) = &m.cause {
        set.insert("cause".into(), cause.clone());
    }
    set
}

/// The annotations that quote the measured value, and so change at nearly every evaluation of an
/// open alert: they are refreshed with it (see [`figures_refresh`]), not written each time.
const FIGURE_ANNOTATIONS: [&str; 2] = ["summary", "description"];

/// The evaluations in which an open alert whose state and annotations hold is written once.
const FIGURES_REFRESHED_EVERY_EVALUATIONS: u32 = 4;

/// How often an open alert whose state, labels and annotations (but its figures) hold is
/// written again, evaluated every `every`: its value and the annotations that quote it are at
/// most this plus one evaluation old in the database (75 s at the default 15 s).
pub fn figures_refresh(every: Duration) -> Duration {
    every * FIGURES_REFRESHED_EVERY_EVALUATIONS
}

/// Whether `alert`, which stays open as `(state, fired_ms)` with annotations `notes` now, is
/// written at `now_ms`: when its state moves, its label set was never stored, its annotations
/// change beyond the figures they quote (a new cause, suggestion or tick mode), or its figures
/// are due their refresh every `refresh_ms`.
fn written_again(
    alert: &AlertRow,
    (state, fired_ms): (AlertState, Option<i64>),
    labels_stored: bool,
    notes: &LabelSet,
    now_ms: i64,
    refresh_ms: i64,
) -> bool {
    (alert.state, alert.fired_ms) != (state, fired_ms)
        || !labels_stored
        || differ_beyond_figures(&parse_set(&alert.annotations_json), notes)
        || alerting::refresh_due(alert.id.0, alert.evaluated_ms, now_ms, refresh_ms)
}

/// Whether two annotation sets differ in more than the figures they quote.
fn differ_beyond_figures(stored: &LabelSet, now: &LabelSet) -> bool {
    fn beyond(set: &LabelSet) -> impl Iterator<Item = (&String, &String)> {
        set.iter()
            .filter(|(name, _)| !FIGURE_ANNOTATIONS.contains(&name.as_str()))
    }
    !beyond(stored).eq(beyond(now))
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// What one evaluation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluated {
    pub firing: usize,
    pub pending: usize,
    /// Alerts that fired or resolved in this evaluation.
    pub transitions: usize,
    /// Notifications written to the outbox.
    pub notifications: usize,
    /// Rules that could not be read, and were skipped: their open alerts were not judged.
    pub unread_rules: Vec<RuleId>,
}

/// Evaluates every rule at `now_ms` and stores the outcome with its notifications.
pub async fn evaluate<S>(state: &S, now_ms: i64) -> AppResult<Evaluated>
where
    AlertContext: FromRef<S>,
{
    let state = &AlertContext::from_ref(state);
    let db = &state.db;
    let rules: Vec<RuleRow> = db.alert_rules().await?;
    let mut open: HashMap<(RuleId, Subject, i64), AlertRow> = HashMap::new();
    for alert in db.open_alerts().await? {
        open.insert((alert.rule_id, alert.subject, alert.subject_id), alert);
    }
    let silences = silences_in_force(db, now_ms).await?;
    let receivers: Vec<ReceiverRow> = db
        .receivers()
        .await?
        .into_iter()
        .filter(|r| r.enabled)
        .collect();
    let fleet = state.fleet.published();
    let hosts = db.hosts().await?;
    let external_url = state.external_url.trim_end_matches('/');
    let refresh_ms = figures_refresh(state.every).as_millis() as i64;

    // Every rule over every guest: work that grows with the fleet, off the pages' way.
    let (writes, evaluated) = crate::work::cpu_bound(|| {
        // The ranking's walk too (a lookup of each guest), not on an async worker.
        let guests: Vec<_> = fleet.ranked(now_ms).collect();
        let mut writes = Vec::new();
        let mut evaluated = Evaluated::default();
        for row in rules {
            let rule_id = row.id;
            let Some(rule) = Rule::parse(row) else {
                tracing::warn!(
                    rule_id = rule_id.0,
                    "an alert rule cannot be read; it is skipped"
                );
                evaluated.unread_rules.push(rule_id);
                continue;
            };
            let mut subjects: Vec<(Measure, bool)> = if !rule.row.settings.enabled {
                Vec::new()
            } else {
                let measures: Vec<Measure> = match rule.kind {
                    RuleKind::GuestWaste => guests
                        .iter()
                        .filter(|g| rule.scope.takes_guest(g))
                        .map(|g| guest_measure(g))
                        .collect(),
                    RuleKind::HostSilent => hosts
                        .iter()
                        .filter(|h| rule.scope.takes_host(h))
                        .map(|h| host_measure(h, now_ms))
                        .collect(),
                };
                measures
                    .into_iter()
                    .map(|m| {
                        let holds = m.value >= rule.row.settings.threshold;
                        (m, holds)
                    })
                    .collect()
            };
            // Open alerts whose subject is no longer measured (a guest no longer reported, a rule
            // disabled or narrowed): the condition no longer holds for them.
            // A set of what was measured, not a search per alert: at 100,000 guests with
            // thousands of alerts open, that search was 30 % of the server's CPU (perf).
            let measured: HashSet<(Subject, i64)> =
                subjects.iter().map(|(m, _)| (m.subject, m.id)).collect();
            for ((rule_of, subject, id), alert) in &open {
                if *rule_of == rule_id && !measured.contains(&(*subject, *id)) {
                    subjects.push((gone(alert), false));
                }
            }
            let duration_ms = rule.row.settings.duration_s.saturating_mul(1000);
            for (m, holds) in &subjects {
                let alert = open.get(&(rule_id, m.subject, m.id));
                // The label set is the one stored when the alert opened; a new alert's (or one
                // stored before labels were kept) is made now.
                let stored_labels = alert
                    .map(|a| parse_set(&a.labels_json))
                    .filter(|l| !l.is_empty());
                let labels = stored_labels
                    .clone()
                    .unwrap_or_else(|| alert_labels(&rule.row, m));
                let mut notes = annotations(&rule, m);
                if let (Some(a), false) = (alert, *holds) {
                    // Resolving: what was last known of the subject stays where nothing newer is
                    // known (a guest no longer reported has no tick mode now).
                    let mut kept = parse_set(&a.annotations_json);
                    kept.extend(notes);
                    notes = kept;
                }
                let previous = alert.map(open_state);
                let step = alerting::step(previous, *holds, now_ms, duration_ms);
                let transition = alerting::transition(previous, step);
                if transition.is_some() {
                    evaluated.transitions += 1;
                }
                let notify = match transition {
                    Some(t)
                        if !alerting::silenced(&silences, rule_id.0, &m.name, &m.host, now_ms) =>
                    {
                        let notice = Notice {
                            rule: &rule,
                            measure: m,
                            labels: &labels,
                            annotations: &notes,
                            transition: t,
                            active_ms: active_since(step, alert, now_ms),
                            fired_ms: fired_at(step, alert, now_ms),
                            now_ms,
                            external_url,
                        };
                        receivers.iter().map(|r| notice.notify(r)).collect()
                    }
                    _ => Vec::new(),
                };
                evaluated.notifications += notify.len();
                match step {
                    Step::Keep(o) => {
                        match o {
                            Open::Pending { .. } => evaluated.pending += 1,
                            Open::Firing { .. } => evaluated.firing += 1,
                        }
                        let (state, fired_ms) = stored(o);
                        // An open alert as it was but for its figures is left alone until they
                        // are due a refresh: rewriting every open alert at every evaluation
                        // held the write lock for seconds at 100,000 guests.
                        if let Some(a) = alert
                            && !written_again(
                                a,
                                (state, fired_ms),
                                stored_labels.is_some(),
                                &notes,
                                now_ms,
                                refresh_ms,
                            )
                        {
                            continue;
                        }
                        let annotations_json = set_json(&notes);
                        writes.push(match alert {
                            None => AlertWrite::Open(NewAlert {
                                rule_id,
                                subject: m.subject,
                                subject_id: m.id,
                                subject_name: m.name.clone(),
                                host_name: m.host.clone(),
                                state,
                                active_ms: active_since(step, None, now_ms),
                                fired_ms,
                                value: m.value,
                                labels_json: set_json(&labels),
                                annotations_json,
                                notify,
                            }),
                            Some(a) => AlertWrite::Update(AlertUpdate {
                                alert_id: a.id,
                                state,
                                fired_ms,
                                value: m.value,
                                labels_json: stored_labels.is_none().then(|| set_json(&labels)),
                                annotations_json,
                                notify,
                            }),
                        });
                    }
                    Step::Cancel => {
                        if let Some(a) = alert {
                            writes.push(AlertWrite::Cancel { alert_id: a.id });
                        }
                    }
                    Step::Resolve => {
                        if let Some(a) = alert {
                            writes.push(AlertWrite::Resolve(AlertResolution {
                                alert_id: a.id,
                                value: m.value,
                                annotations_json: set_json(&notes),
                                notify,
                            }));
                        }
                    }
                    Step::Inactive => {}
                }
            }
        }
        (writes, evaluated)
    });
    let written = db.write_alerts(writes, now_ms).await;
    // Also when a later transaction failed: the earlier ones' notifications are stored and due.
    if evaluated.notifications > 0 {
        state.notifier.notify_one();
    }
    written?;
    Ok(evaluated)
}

/// When an alert became active: as the step says, else as stored, else now.
fn active_since(step: Step, alert: Option<&AlertRow>, now_ms: i64) -> i64 {
    match step {
        Step::Keep(Open::Pending { active_ms } | Open::Firing { active_ms, .. }) => active_ms,
        _ => alert.map_or(now_ms, |a| a.active_ms),
    }
}

/// When an alert fired: as the step says, else as stored, else now.
fn fired_at(step: Step, alert: Option<&AlertRow>, now_ms: i64) -> i64 {
    match step {
        Step::Keep(Open::Firing { fired_ms, .. }) => fired_ms,
        _ => alert.and_then(|a| a.fired_ms).unwrap_or(now_ms),
    }
}

/// The measure of an open alert's subject that is no longer measured: its last value.
fn gone(alert: &AlertRow) -> Measure {
    Measure {
        subject: alert.subject,
        id: alert.subject_id,
        name: alert.subject_name.clone(),
        host: alert.host_name.clone(),
        value: alert.value,
        labels: gone_labels(alert),
        summary: format!(
            "{} is no longer reported, or no longer watched by this rule.",
            alert.subject_name
        ),
        suggestion: None,
        tick_mode: None,
        cause: None,
    }
}

/// The subject labels of an alert stored without a label set (opened before they were kept).
fn gone_labels(alert: &AlertRow) -> Vec<(&'static str, String)> {
    match alert.subject {
        Subject::Host => vec![("host", alert.host_name.clone())],
        Subject::Guest => vec![
            ("guest", alert.subject_name.clone()),
            ("guest_id", alert.subject_id.to_string()),
            ("host", alert.host_name.clone()),
        ],
    }
}

fn open_state(alert: &AlertRow) -> Open {
    match (alert.state, alert.fired_ms) {
        (AlertState::Firing, Some(fired_ms)) => Open::Firing {
            active_ms: alert.active_ms,
            fired_ms,
        },
        _ => Open::Pending {
            active_ms: alert.active_ms,
        },
    }
}

fn stored(open: Open) -> (AlertState, Option<i64>) {
    match open {
        Open::Pending { .. } => (AlertState::Pending, None),
        Open::Firing { fired_ms, .. } => (AlertState::Firing, Some(fired_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::RuleSettings;

    #[test]
    fn an_open_alert_is_written_again_when_more_than_its_figures_change_or_they_are_due() {
        let notes = |summary: &str, cause: &str| -> LabelSet {
            [
                ("summary", summary),
                ("description", "r: 5.25 % of a core"),
                ("cause", cause),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let stored_notes = notes("web-01 wastes 5.25 %", "ticking_kernel");
        let alert = AlertRow {
            id: crate::domain::AlertId(7),
            rule_id: RuleId(1),
            rule_name: "r".into(),
            severity: "warning".into(),
            subject: Subject::Guest,
            subject_id: 3,
            subject_name: "web-01".into(),
            host_name: "hv1".into(),
            state: AlertState::Firing,
            active_ms: 1_000,
            fired_ms: Some(2_000),
            resolved_ms: None,
            value: 5.25,
            evaluated_ms: 100_000,
            acked_by: None,
            acked_ms: None,
            labels_json: r#"{"alertname":"r"}"#.into(),
            annotations_json: set_json(&stored_notes),
        };
        const R: i64 = 60_000;
        // The first moment after the alert's writing at which its figures are due.
        let due_ms = (100_001..)
            .find(|&t| alerting::refresh_due(7, 100_000, t, R))
            .unwrap();
        let firing = (AlertState::Firing, Some(2_000));
        let other_figures = notes("web-01 wastes 6.10 %", "ticking_kernel");
        // (state, labels stored, annotations now, now_ms, written)
        let cases = [
            // Only the figures moved: left alone until they are due, then written.
            (firing, true, &other_figures, due_ms - 1, false),
            (firing, true, &stored_notes, due_ms - 1, false),
            (firing, true, &other_figures, due_ms, true),
            (firing, true, &other_figures, 100_000 + R, true),
            // A new cause, a state that moved, labels never stored: written at once.
            (
                firing,
                true,
                &notes("web-01 wastes 5.25 %", "guest_polling"),
                100_001,
                true,
            ),
            (
                (AlertState::Pending, None),
                true,
                &stored_notes,
                100_001,
                true,
            ),
            (
                (AlertState::Firing, Some(3_000)),
                true,
                &stored_notes,
                100_001,
                true,
            ),
            (firing, false, &stored_notes, 100_001, true),
        ];
        for (i, (state, labels_stored, now_notes, now_ms, written)) in cases.into_iter().enumerate()
        {
            assert_eq!(
                written_again(&alert, state, labels_stored, now_notes, now_ms, R),
                written,
                "case {i}"
            );
        }
        // A cause no longer known, a new suggestion or tick mode: written at once; a new
        // description alone (the rule's threshold edited): with the figures.
        let changed = |name: &str, value: Option<&str>| {
            let mut notes = stored_notes.clone();
            match value {
                Some(v) => notes.insert(name.to_string(), v.to_string()),
                None => notes.remove(name),
            };
            written_again(&alert, firing, true, &notes, 100_001, R)
        };
        assert!(changed("cause", None));
        assert!(changed("suggestion", Some("Remove `nohz=off`")));
        assert!(changed("tick_mode", Some("dyntick_idle")));
        assert!(!changed(
            "description",
            Some("r: 5.25 % of a core (threshold 3)")
        ));
        assert_eq!(
            figures_refresh(Duration::from_secs(15)),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn a_guest_alerts_labels_leave_out_what_changes_while_it_is_open() {
        let rule = RuleRow {
            id: RuleId(3),
            settings: RuleSettings {
                name: "Idle guest burning CPU".into(),
                kind: crate::domain::RuleKind::GuestWaste,
                scope: "all".into(),
                scope_value: String::new(),
                threshold: 2.0,
                duration_s: 0,
                severity: "warning".into(),
                enabled: true,
            },
            updated_ms: 0,
            updated_by: "t".into(),
        };
        let m = Measure {
            subject: Subject::Guest,
            id: 7,
            name: "web-01".into(),
            host: "hv1".into(),
            value: 5.25,
            labels: vec![
                ("guest", "web-01".into()),
                ("guest_id", "7".into()),
                ("host", "hv1".into()),
                ("hypervisor", "qemu".into()),
            ],
            summary: "s".into(),
            suggestion: Some("boot with nohz=on".into()),
            tick_mode: Some("periodic".into()),
            cause: Some("ticking_kernel".into()),
        };
        let labels = alert_labels(&rule, &m);
        let names: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "alertname",
                "guest",
                "guest_id",
                "host",
                "hypervisor",
                "rule_id",
                "severity"
            ]
        );
        let notes = annotations(&Rule::parse(rule).unwrap(), &m);
        assert_eq!(notes["tick_mode"], "periodic");
        assert_eq!(notes["cause"], "ticking_kernel");
        assert_eq!(notes["suggestion"], "boot with nohz=on");
        assert!(
            notes["description"].contains("5.25 % of a core"),
            "{notes:?}"
        );
    }
}
