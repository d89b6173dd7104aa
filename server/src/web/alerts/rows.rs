//! The rows of `/alerts`, each made from what storage holds: an alert (also a row of the
//! overview and of a guest's page), a rule, a silence, a receiver.

use crate::alerts::labels;
use crate::analysis::alerting::{self, Silence};
use crate::db::{AlertRow, ReceiverRow, ReceiverSettings, RuleRow, SilenceRow};
use crate::domain::AlertState;
use crate::web::view;

/// An alert as a row of `/alerts`, of the overview and of a guest's page.
pub struct AlertLine {
    pub id: i64,
    pub rule: String,
    pub severity: String,
    /// `/guests/3` or `/hosts/1`.
    pub link: String,
    pub subject: String,
    pub host: String,
    pub state: String,
    pub value: String,
    /// Since when it is active (pending or firing), and for how long.
    pub since: String,
    pub lasted: String,
    pub fired: String,
    pub resolved: String,
    pub acked: String,
    pub silenced: bool,
}

impl AlertLine {
    /// `rules`: the stored rules, of which the alert's own gives the unit of its value (none if
    /// it was deleted since the alert was read).
    pub fn new(a: &AlertRow, rules: &[RuleRow], silences: &[Silence], now: i64) -> AlertLine {
        let unit = rules
            .iter()
            .find(|r| r.id == a.rule_id)
            .map_or("", |r| r.settings.kind.unit());
        let end = a.resolved_ms.unwrap_or(now);
        AlertLine {
            id: a.id.0,
            rule: a.rule_name.clone(),
            severity: a.severity.clone(),
            link: format!("/{}s/{}", a.subject, a.subject_id),
            subject: a.subject_name.clone(),
            host: a.host_name.clone(),
            state: a.state.to_string(),
            value: format!("{:.2} {unit}", a.value).trim_end().to_string(),
            since: view::time(a.active_ms),
            lasted: view::duration(end - a.fired_ms.unwrap_or(a.active_ms)),
            fired: a.fired_ms.map(view::time).unwrap_or_default(),
            resolved: a.resolved_ms.map(view::time).unwrap_or_default(),
            acked: match (&a.acked_by, a.acked_ms) {
                (Some(by), Some(at)) => format!("{by}, {}", view::ago(at, now)),
                _ => String::new(),
            },
            silenced: a.state != AlertState::Resolved
                && alerting::silenced(silences, a.rule_id.0, &a.subject_name, &a.host_name, now),
        }
    }
}

/// A rule, its condition in words.
pub struct RuleLine {
    pub id: i64,
    pub name: String,
    pub watches: String,
    pub scope: String,
    pub condition: String,
    pub severity: String,
    pub enabled: bool,
    pub updated: String,
}

impl RuleLine {
    pub fn new(r: &RuleRow) -> RuleLine {
        RuleLine {
            id: r.id.0,
            name: r.settings.name.clone(),
            watches: r.settings.kind.label().into(),
            scope: match r.settings.scope.as_str() {
                "all" => "all".into(),
                scope => format!("{scope} {}", r.settings.scope_value),
            },
            condition: format!(
                "≥ {} {} for {}",
                r.settings.threshold,
                r.settings.kind.unit(),
                view::duration(r.settings.duration_s * 1000)
            ),
            severity: r.settings.severity.clone(),
            enabled: r.settings.enabled,
            // The rules a new database comes with were never changed by anyone.
            updated: if r.updated_ms == 0 {
                "built in".into()
            } else {
                format!("{}, by {}", view::time(r.updated_ms), r.updated_by)
            },
        }
    }
}

/// A silence in force.
pub struct SilenceLine {
    pub id: i64,
    pub rule: String,
    pub pattern: String,
    pub from: String,
    pub until: String,
    pub reason: String,
    pub by: String,
}

/// A webhook receiver, without its secrets (taken out of its settings), its group labels as
/// a list.
pub struct ReceiverLine {
    pub id: i64,
    pub settings: ReceiverSettings,
    /// Whether an auth header is stored: the header itself is never shown back.
    pub auth_set: bool,
    pub ca_set: bool,
}

impl SilenceLine {
    /// `rules`: the stored rules, which name the silence's own.
    pub fn new(s: SilenceRow, rules: &[RuleRow]) -> SilenceLine {
        SilenceLine {
            id: s.id.0,
            rule: s.rule_id.map_or("any rule".to_string(), |id| {
                rules
                    .iter()
                    .find(|r| r.id == id)
                    .map_or(format!("rule {id}"), |r| r.settings.name.clone())
            }),
            pattern: if s.pattern.is_empty() {
                "any guest or host".into()
            } else {
                s.pattern
            },
            from: view::time(s.starts_ms),
            until: view::time(s.ends_ms),
            reason: s.reason,
            by: s.created_by,
        }
    }
}

impl ReceiverLine {
    pub fn new(r: ReceiverRow) -> ReceiverLine {
        let mut settings = r.settings;
        settings.group_by = labels::parse_group_by(&settings.group_by).join(", ");
        ReceiverLine {
            id: r.id.0,
            auth_set: settings.auth_header.take().is_some(),
            ca_set: settings.ca_pem.take().is_some(),
            settings,
        }
    }
}
