//! What a rule measures of one subject (a guest's waste, a host's silence) and how the
//! subject is named, for the evaluation and the notifications alike.

use crate::analysis::plan;
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
    /// changes, so it is an annotation (and so is its cause as judged now).
    pub labels: Vec<(&'static str, String)>,
    pub summary: String,
    /// What to change, for a guest that has a suggestion.
    pub suggestion: Option<String>,
    /// The guest's tick mode as judged now.
    pub tick_mode: Option<String>,
    /// The cause of idle burn the guest is filed under now.
    pub cause: Option<String>,
}

pub(super) fn guest_measure(g: &AnalysedGuest) -> Measure {
    let waste = g.wasted_cpu_pct();
    let suggestion = plan::planned(&g.verdict.suggestions).map(|s| s.title.to_string());
    let mode = g.verdict.classification.mode.as_str();
    let cause = g.verdict.cause;
    Measure {
        subject: Subject::Guest,
        id: g.id.0,
        name: g.name.clone(),
        host: g.host.clone(),
        value: waste,
        labels: guest_labels(g),
        summary: format!(
            "{} on {} wastes {waste:.2} % of a host core while idle ({mode}{}).{}",
            g.name,
            g.host,
            cause
                .map(|c| format!(", {}", c.label().to_lowercase()))
                .unwrap_or_default(),
            suggestion
                .as_ref()
                .map(|s| format!(" Suggested: {s}."))
                .unwrap_or_default()
        ),
        suggestion,
        tick_mode: Some(mode.to_string()),
        cause: cause.map(|c| c.as_str().to_string()),
    }
}

/// A guest alert's labels: who it is (by tickscope's names and, where known, its platform's),
/// its OS where something tells it, and the cause it is filed under as the alert opens. They
/// are kept for the alert's life (a cause that changes while it is open is an annotation), so
/// Alertmanager sees one alert, not one per cause.
fn guest_labels(g: &AnalysedGuest) -> Vec<(&'static str, String)> {
    let mut labels = vec![
        ("guest", g.name.clone()),
        ("guest_id", g.id.to_string()),
        ("host", g.host.clone()),
        ("hypervisor", g.hypervisor.clone()),
    ];
    labels.extend(
        g.about_labels()
            .into_iter()
            .map(|(name, value)| (name, value.to_string())),
    );
    labels
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
        cause: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::platform::VmSetup;
    use crate::analysis::test_window;
    use tickscope_wire::Platform;

    fn labels(g: &AnalysedGuest) -> Vec<(&'static str, String)> {
        guest_measure(g).labels
    }

    #[test]
    fn a_guest_alert_is_labelled_with_its_platform_os_and_cause_where_known() {
        // A Windows guest without synthetic timers, named by OpenStack.
        let mut window = test_window(2, 24.0, 60.0, None);
        window.setup = VmSetup::from_stored(Some("relaxed,vapic"), Some(true), Some("win2k19"));
        let g = AnalysedGuest {
            platform: Some(Platform {
                kind: "openstack".into(),
                name: Some("sql-01".into()),
                group: Some("finance".into()),
                flavor: Some("m1.large".into()),
                id: None,
            }),
            setup: window.setup.clone(),
            ..AnalysedGuest::example(1, &window)
        };
        let all = labels(&g);
        let got: Vec<(&str, &str)> = all.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("guest", "guest-1"),
                ("guest_id", "1"),
                ("host", "hv"),
                ("hypervisor", "qemu"),
                ("os", "windows"),
                ("cause", "windows_timers"),
                ("platform", "openstack"),
                ("platform_name", "sql-01"),
                ("platform_group", "finance"),
            ]
        );
        assert!(
            guest_measure(&g)
                .summary
                .contains("windows without hyper-v timers")
        );
        // A guest nothing is known of, and nothing is wrong with: its names alone.
        let quiet = AnalysedGuest::example(2, &test_window(1, 0.3, 20.0, None));
        let names: Vec<&str> = labels(&quiet).iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["guest", "guest_id", "host", "hypervisor"]);
    }
}
