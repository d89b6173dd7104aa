//! What a rule measures of one subject (a guest's waste, a host's silence) and how the
//! subject is named, for the evaluation and the notifications alike.

use crate::db::HostRow;
use crate::domain::Subject;
use crate::fleet::AnalysedGuest;

/// One subject's measure under a rule.
#[derive(Debug, Clone)]
pub(super) struct Measure {
    pub subject: Subject,
    pub id: i64,
    pub name: String,
    pub host: String,
    pub value: f64,
    /// The labels that name the subject (beside the rule's `alertname`, `severity` and
    /// `rule_id`). Only what stays the same while the alert is open: a guest's tick mode
    /// changes, so it is an annotation.
    pub labels: Vec<(&'static str, String)>,
    pub summary: String,
    /// What to change, for a guest that has a suggestion.
    pub suggestion: Option<String>,
    /// The guest's tick mode as judged now.
    pub tick_mode: Option<String>,
}

pub(super) fn guest_measure(g: &AnalysedGuest) -> Measure {
    let waste = g.wasted_cpu_pct();
    let suggestion = g
        .verdict
        .suggestions
        .iter()
        .find(|s| s.saving_cpu_pct.is_some())
        .or(g.verdict.suggestions.first())
        .map(|s| s.title.to_string());
    let mode = g.verdict.classification.mode.as_str();
    Measure {
        subject: Subject::Guest,
        id: g.id.0,
        name: g.name.clone(),
        host: g.host.clone(),
        value: waste,
        labels: vec![
            ("guest", g.name.clone()),
            ("guest_id", g.id.to_string()),
            ("host", g.host.clone()),
            ("hypervisor", g.hypervisor.clone()),
        ],
        summary: format!(
            "{} on {} wastes {waste:.2} % of a host core while idle ({mode}).{}",
            g.name,
            g.host,
            suggestion
                .as_ref()
                .map(|s| format!(" Suggested: {s}."))
                .unwrap_or_default()
        ),
        suggestion,
        tick_mode: Some(mode.to_string()),
    }
}

pub(super) fn host_measure(h: &HostRow, now_ms: i64) -> Measure {
    let silent_s = ((now_ms - h.last_report_ms) as f64 / 1000.0).max(0.0);
    Measure {
        subject: Subject::Host,
        id: h.id.0,
        name: h.name.clone(),
        host: h.name.clone(),
        value: silent_s,
        labels: vec![("host", h.name.clone())],
        summary: format!(
            "The agent on {} has not reported for {:.0} minute(s).",
            h.name,
            silent_s / 60.0
        ),
        suggestion: None,
        tick_mode: None,
    }
}
