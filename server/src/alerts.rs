//! Alerting: rules evaluated on a timer against the fleet's current state, alert states kept in
//! the database, and notifications delivered from a database outbox to webhook receivers.
//!
//! Flow: [`evaluate`] reads the rules, the open alerts, the silences and the receivers, steps
//! each (rule, subject) with [`alerting::step`], and writes the new states together with the
//! notifications they send in one transaction. [`deliver_due`] posts what the outbox holds, and
//! retries with backoff what fails. A notification is written once per (receiver, alert,
//! transition), so a restart neither loses nor repeats one.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::analysis::alerting::{self, Open, Silence, Step, Transition};
use crate::app::AppState;
use crate::db::{AlertRow, AlertWrite, Db, HostRow, ReceiverRow, RuleRow, SilenceRow};
use crate::error::{AppError, AppResult};
use crate::fleet::AnalysedGuest;

/// What a rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// An active guest's waste, in % of one host core (idle intervals only, see the analysis).
    GuestWaste,
    /// How long a host's agent has been silent, in seconds.
    HostSilent,
}

impl RuleKind {
    pub fn parse(text: &str) -> Option<RuleKind> {
        match text {
            "guest_waste" => Some(RuleKind::GuestWaste),
            "host_silent" => Some(RuleKind::HostSilent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "guest_waste",
            RuleKind::HostSilent => "host_silent",
        }
    }

    /// The kind of rule that watches a stored alert's subject (`guest` or `host`).
    pub fn of_subject(subject: &str) -> RuleKind {
        if subject == "host" {
            RuleKind::HostSilent
        } else {
            RuleKind::GuestWaste
        }
    }

    /// What the rule's alerts are about, as stored.
    pub fn subject(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "guest",
            RuleKind::HostSilent => "host",
        }
    }

    /// The unit of the rule's threshold and of an alert's value.
    pub fn unit(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "% of a core",
            RuleKind::HostSilent => "s silent",
        }
    }
}

/// Which subjects a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// Hosts whose name matches (a `*` pattern).
    Host(String),
    /// Guests of one hypervisor family.
    Hypervisor(String),
    /// Guests whose name matches (a `*` pattern).
    Name(String),
}

impl Scope {
    /// A scope from its stored form; `None` for a combination that makes no sense.
    pub fn parse(kind: RuleKind, scope: &str, value: &str) -> Option<Scope> {
        let scope = match scope {
            "all" => Scope::All,
            "host" => Scope::Host(value.to_string()),
            "hypervisor" => Scope::Hypervisor(value.to_string()),
            "name" => Scope::Name(value.to_string()),
            _ => return None,
        };
        let fits = match (&scope, kind) {
            (Scope::All, _) => true,
            (Scope::Host(v) | Scope::Hypervisor(v) | Scope::Name(v), _) if v.is_empty() => false,
            (Scope::Host(_), _) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), RuleKind::GuestWaste) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), RuleKind::HostSilent) => false,
        };
        fits.then_some(scope)
    }

    fn takes_guest(&self, g: &AnalysedGuest) -> bool {
        match self {
            Scope::All => true,
            Scope::Host(pattern) => alerting::matches(pattern, &g.host),
            Scope::Hypervisor(family) => g.hypervisor.eq_ignore_ascii_case(family),
            Scope::Name(pattern) => alerting::matches(pattern, &g.name),
        }
    }

    fn takes_host(&self, h: &HostRow) -> bool {
        match self {
            Scope::All => true,
            Scope::Host(pattern) => alerting::matches(pattern, &h.name),
            Scope::Hypervisor(_) | Scope::Name(_) => false,
        }
    }
}

/// A rule, parsed.
#[derive(Debug, Clone)]
pub struct Rule {
    pub row: RuleRow,
    pub kind: RuleKind,
    pub scope: Scope,
}

impl Rule {
    pub fn parse(row: RuleRow) -> Option<Rule> {
        let kind = RuleKind::parse(&row.kind)?;
        let scope = Scope::parse(kind, &row.scope, &row.scope_value)?;
        Some(Rule { row, kind, scope })
    }
}

/// One subject's measure under a rule.
#[derive(Debug, Clone)]
struct Measure {
    subject: &'static str,
    id: i64,
    name: String,
    host: String,
    value: f64,
    /// Labels the notification carries beside the rule's.
    labels: Vec<(&'static str, String)>,
    summary: String,
}

fn guest_measure(g: &AnalysedGuest) -> Measure {
    let waste = g.wasted_cpu_pct();
    let suggestion = g
        .verdict
        .suggestions
        .iter()
        .find(|s| s.saving_cpu_pct.is_some())
        .or(g.verdict.suggestions.first())
        .map(|s| format!(" Suggested: {}.", s.title))
        .unwrap_or_default();
    Measure {
        subject: "guest",
        id: g.id,
        name: g.name.clone(),
        host: g.host.clone(),
        value: waste,
        labels: vec![
            ("guest", g.name.clone()),
            ("guest_id", g.id.to_string()),
            ("host", g.host.clone()),
            ("hypervisor", g.hypervisor.clone()),
            (
                "tick_mode",
                g.verdict.classification.mode.as_str().to_string(),
            ),
        ],
        summary: format!(
            "{} on {} wastes {waste:.2} % of a host core while idle ({}).{suggestion}",
            g.name,
            g.host,
            g.verdict.classification.mode.as_str()
        ),
    }
}

fn host_measure(h: &HostRow, now_ms: i64) -> Measure {
    let silent_s = ((now_ms - h.last_report_ms) as f64 / 1000.0).max(0.0);
    Measure {
        subject: "host",
        id: h.id,
        name: h.name.clone(),
        host: h.name.clone(),
        value: silent_s,
        labels: vec![("host", h.name.clone())],
        summary: format!(
            "The agent on {} has not reported for {:.0} minute(s).",
            h.name,
            silent_s / 60.0
        ),
    }
}

/// The silences that have not ended by `now_ms`, as the evaluation and the pages match them.
pub async fn silences_in_force(db: &Db, now_ms: i64) -> AppResult<Vec<Silence>> {
    Ok(as_silences(&db.silences(now_ms).await?))
}

/// Stored silences as the evaluation matches them.
pub fn as_silences(rows: &[SilenceRow]) -> Vec<Silence> {
    rows.iter()
        .map(|s| Silence {
            rule_id: s.rule_id,
            pattern: s.pattern.clone(),
            starts_ms: s.starts_ms,
            ends_ms: s.ends_ms,
        })
        .collect()
}

/// What one evaluation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evaluated {
    pub firing: usize,
    pub pending: usize,
    /// Notifications written to the outbox.
    pub notifications: usize,
}

/// Evaluates every rule at `now_ms` and stores the outcome with its notifications.
pub async fn evaluate(state: &AppState, now_ms: i64) -> AppResult<Evaluated> {
    let db = &state.db;
    let rules: Vec<RuleRow> = db.alert_rules().await?;
    let mut open: HashMap<(i64, &'static str, i64), AlertRow> = HashMap::new();
    for alert in db.open_alerts().await? {
        let subject = RuleKind::of_subject(&alert.subject).subject();
        open.insert((alert.rule_id, subject, alert.subject_id), alert);
    }
    let silences = silences_in_force(db, now_ms).await?;
    let receivers: Vec<ReceiverRow> = db
        .receivers()
        .await?
        .into_iter()
        .filter(|r| r.enabled)
        .collect();
    let guests = state.ranked(now_ms).await;
    let hosts = db.hosts().await?;
    let external_url = state.options.external_url.trim_end_matches('/');

    let mut writes = Vec::new();
    let mut evaluated = Evaluated::default();
    for row in rules {
        let rule_id = row.id;
        let Some(rule) = Rule::parse(row) else {
            tracing::warn!(rule_id, "an alert rule cannot be read; it is skipped");
            continue;
        };
        let mut subjects: Vec<(Measure, bool)> = if !rule.row.enabled {
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
                    let holds = m.value >= rule.row.threshold;
                    (m, holds)
                })
                .collect()
        };
        // Open alerts whose subject is no longer measured (a guest no longer reported, a rule
        // disabled or narrowed): the condition no longer holds for them.
        for ((rule_of, subject, id), alert) in &open {
            let measured = subjects
                .iter()
                .any(|(m, _)| m.subject == *subject && m.id == *id);
            if *rule_of == rule_id && !measured {
                subjects.push((gone(alert), false));
            }
        }
        let duration_ms = rule.row.duration_s.saturating_mul(1000);
        for (m, holds) in &subjects {
            let alert = open.get(&(rule_id, m.subject, m.id));
            let previous = alert.map(open_state);
            let step = alerting::step(previous, *holds, now_ms, duration_ms);
            let notify = match alerting::transition(previous, step) {
                Some(t) if !alerting::silenced(&silences, rule_id, &m.name, &m.host, now_ms) => {
                    let notice = Notice {
                        rule: &rule,
                        measure: m,
                        transition: t,
                        active_ms: active_since(step, alert, now_ms),
                        now_ms,
                        external_url,
                    };
                    receivers
                        .iter()
                        .map(|r| (r.id, notice.payload(r)))
                        .collect()
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
                    writes.push(match alert {
                        None => AlertWrite::Open {
                            rule_id,
                            subject: m.subject,
                            subject_id: m.id,
                            subject_name: m.name.clone(),
                            host_name: m.host.clone(),
                            state,
                            active_ms: active_since(step, None, now_ms),
                            fired_ms,
                            value: m.value,
                            notify,
                        },
                        Some(a) => AlertWrite::Update {
                            alert_id: a.id,
                            state,
                            fired_ms,
                            value: m.value,
                            notify,
                        },
                    });
                }
                Step::Cancel => {
                    if let Some(a) = alert {
                        writes.push(AlertWrite::Cancel { alert_id: a.id });
                    }
                }
                Step::Resolve => {
                    if let Some(a) = alert {
                        writes.push(AlertWrite::Resolve {
                            alert_id: a.id,
                            value: m.value,
                            notify,
                        });
                    }
                }
                Step::Inactive => {}
            }
        }
    }
    db.write_alerts(writes, now_ms).await?;
    if evaluated.notifications > 0 {
        state.notifier.notify_one();
    }
    Ok(evaluated)
}

/// When an alert became active: as the step says, else as stored, else now.
fn active_since(step: Step, alert: Option<&AlertRow>, now_ms: i64) -> i64 {
    match step {
        Step::Keep(Open::Pending { active_ms } | Open::Firing { active_ms, .. }) => active_ms,
        _ => alert.map_or(now_ms, |a| a.active_ms),
    }
}

/// The measure of an open alert's subject that is no longer measured: its last value.
fn gone(alert: &AlertRow) -> Measure {
    Measure {
        subject: RuleKind::of_subject(&alert.subject).subject(),
        id: alert.subject_id,
        name: alert.subject_name.clone(),
        host: alert.host_name.clone(),
        value: alert.value,
        labels: gone_labels(alert),
        summary: format!(
            "{} is no longer reported, or no longer watched by this rule.",
            alert.subject_name
        ),
    }
}

fn gone_labels(alert: &AlertRow) -> Vec<(&'static str, String)> {
    if alert.subject == "host" {
        vec![("host", alert.host_name.clone())]
    } else {
        vec![
            ("guest", alert.subject_name.clone()),
            ("guest_id", alert.subject_id.to_string()),
            ("host", alert.host_name.clone()),
        ]
    }
}

fn open_state(alert: &AlertRow) -> Open {
    match (alert.state.as_str(), alert.fired_ms) {
        ("firing", Some(fired_ms)) => Open::Firing {
            active_ms: alert.active_ms,
            fired_ms,
        },
        _ => Open::Pending {
            active_ms: alert.active_ms,
        },
    }
}

fn stored(open: Open) -> (&'static str, Option<i64>) {
    match open {
        Open::Pending { .. } => ("pending", None),
        Open::Firing { fired_ms, .. } => ("firing", Some(fired_ms)),
    }
}

/// One transition of one alert, to be told to receivers.
struct Notice<'a> {
    rule: &'a Rule,
    measure: &'a Measure,
    transition: Transition,
    active_ms: i64,
    now_ms: i64,
    external_url: &'a str,
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Notice<'_> {
    fn link(&self) -> String {
        format!(
            "{}/{}s/{}",
            self.external_url, self.measure.subject, self.measure.id
        )
    }

    fn labels(&self) -> serde_json::Map<String, Value> {
        let mut labels = serde_json::Map::new();
        labels.insert("alertname".into(), json!(self.rule.row.name));
        labels.insert("severity".into(), json!(self.rule.row.severity));
        labels.insert("rule_id".into(), json!(self.rule.row.id.to_string()));
        for (name, value) in &self.measure.labels {
            labels.insert((*name).into(), json!(value));
        }
        labels
    }

    /// The same alert always has the same fingerprint (rule and subject), as Alertmanager's.
    fn fingerprint(&self) -> String {
        let key = format!(
            "{}/{}/{}",
            self.rule.row.id, self.measure.subject, self.measure.id
        );
        crate::auth::token_hash(&key)[..16].to_string()
    }

    fn payload(&self, receiver: &ReceiverRow) -> String {
        let status = self.transition.as_str();
        let ends_at = match self.transition {
            Transition::Firing => "0001-01-01T00:00:00Z".to_string(),
            Transition::Resolved => rfc3339(self.now_ms),
        };
        let annotations = json!({
            "summary": self.measure.summary,
            "description": format!(
                "{}: {} {} (threshold {} {}, for {} s).",
                self.rule.row.name,
                format_value(self.measure.value),
                self.rule.kind.unit(),
                format_value(self.rule.row.threshold),
                self.rule.kind.unit(),
                self.rule.row.duration_s
            ),
        });
        let body = if receiver.format == "alertmanager" {
            let labels = self.labels();
            json!({
                "version": "4",
                "groupKey": format!("{{}}:{{alertname={:?}}}", self.rule.row.name),
                "truncatedAlerts": 0,
                "status": status,
                "receiver": receiver.name,
                "groupLabels": {"alertname": self.rule.row.name},
                "commonLabels": labels,
                "commonAnnotations": annotations,
                "externalURL": self.external_url,
                "alerts": [{
                    "status": status,
                    "labels": labels,
                    "annotations": annotations,
                    "startsAt": rfc3339(self.active_ms),
                    "endsAt": ends_at,
                    "generatorURL": self.link(),
                    "fingerprint": self.fingerprint(),
                }],
            })
        } else {
            json!({
                "status": status,
                "rule": {"id": self.rule.row.id, "name": self.rule.row.name, "kind": self.rule.kind.as_str()},
                "severity": self.rule.row.severity,
                "subject": {"kind": self.measure.subject, "id": self.measure.id, "name": self.measure.name, "host": self.measure.host},
                "value": self.measure.value,
                "threshold": self.rule.row.threshold,
                "unit": self.rule.kind.unit(),
                "summary": self.measure.summary,
                "active_since": rfc3339(self.active_ms),
                "at": rfc3339(self.now_ms),
                "url": self.link(),
                "fingerprint": self.fingerprint(),
            })
        };
        body.to_string()
    }
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Attempts before a notification is given up: with a 5 s base and a 15-minute cap, about
/// two hours of trying.
pub const MAX_ATTEMPTS: i64 = 12;

/// How long after failed attempt number `attempts` (1-based) the next is made: `base_ms`
/// doubled per attempt, at most 15 minutes, with up to a fifth added at random so that many
/// notifications failing together do not retry together.
pub fn retry_delay_ms(attempts: i64, base_ms: i64, random: u32) -> i64 {
    const CAP_MS: i64 = 15 * 60 * 1000;
    let exponent = (attempts - 1).clamp(0, 30) as u32;
    let delay = base_ms.saturating_mul(1_i64 << exponent).min(CAP_MS);
    delay + delay / 5 * i64::from(random % 1000) / 1000
}

/// Posts every notification due now, oldest first; returns how many were delivered.
pub async fn deliver_due(state: &AppState) -> AppResult<usize> {
    let mut delivered = 0;
    loop {
        let now_ms = crate::app::now_ms();
        let due = state.db.due_notifications(now_ms, 20).await?;
        if due.is_empty() {
            return Ok(delivered);
        }
        for n in due {
            let url = n.url.clone();
            let payload = n.payload.clone();
            let sent = tokio::task::spawn_blocking(move || post_json(&url, &payload))
                .await
                .map_err(|e| AppError::Internal(format!("notification task: {e}")))?;
            let now_ms = crate::app::now_ms();
            match sent {
                Ok(()) => {
                    state.db.notification_delivered(n.id, now_ms).await?;
                    state.metrics.notification("delivered");
                    tracing::info!(receiver = ?n.receiver, alert = n.alert_id, transition = %n.transition, "notification delivered");
                    delivered += 1;
                }
                Err(e) => {
                    let attempts = n.attempts + 1;
                    let next = (attempts < MAX_ATTEMPTS).then(|| {
                        let random = getrandom::u32().unwrap_or(0);
                        now_ms + retry_delay_ms(attempts, state.options.retry_base_ms, random)
                    });
                    state.db.notification_failed(n.id, &e, next, now_ms).await?;
                    state.metrics.notification(if next.is_some() {
                        "retried"
                    } else {
                        "given_up"
                    });
                    tracing::warn!(receiver = ?n.receiver, alert = n.alert_id, attempts, error = %e, "notification failed");
                }
            }
        }
    }
}

/// One POST; `Err` with what went wrong unless the receiver answered 2xx.
fn post_json(url: &str, payload: &str) -> Result<(), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .user_agent(concat!("tickscope-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(payload)
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

/// Runs the evaluation every `every` and the delivery whenever something is due, until the
/// server stops.
pub fn spawn(state: AppState, every: Duration) {
    let evaluating = state.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(e) = evaluate(&evaluating, crate::app::now_ms()).await {
                tracing::warn!(error = %e, "alert rules could not be evaluated");
            }
        }
    });
    tokio::spawn(async move {
        loop {
            if let Err(e) = deliver_due(&state).await {
                tracing::warn!(error = %e, "notifications could not be delivered");
            }
            // Sleep until the next retry is due (at most a minute), or until an evaluation
            // writes a new notification.
            let wait_ms = match state.db.next_notification_ms().await {
                Ok(Some(at)) => (at - crate::app::now_ms()).clamp(50, 60_000),
                _ => 60_000,
            };
            let _ = tokio::time::timeout(
                Duration::from_millis(wait_ms as u64),
                state.notifier.notified(),
            )
            .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_a_cap() {
        let cases = [
            (1, 0, 5_000),
            (2, 0, 10_000),
            (3, 0, 20_000),
            (12, 0, 900_000),
            (40, 0, 900_000),
            (1, 999, 5_000 + 999),
        ];
        for (attempts, random, expected) in cases {
            assert_eq!(
                retry_delay_ms(attempts, 5_000, random),
                expected,
                "{attempts}"
            );
        }
        assert!(retry_delay_ms(1, 5_000, 500) > 5_000);
    }

    #[test]
    fn scopes_fit_their_rule_kind() {
        use RuleKind::*;
        let cases = [
            (GuestWaste, "all", "", Some(Scope::All)),
            (GuestWaste, "host", "hv-*", Some(Scope::Host("hv-*".into()))),
            (
                GuestWaste,
                "hypervisor",
                "qemu",
                Some(Scope::Hypervisor("qemu".into())),
            ),
            (GuestWaste, "name", "", None),
            (HostSilent, "host", "hv-1", Some(Scope::Host("hv-1".into()))),
            (HostSilent, "name", "web-*", None),
            (HostSilent, "hypervisor", "qemu", None),
            (GuestWaste, "everything", "", None),
        ];
        for (kind, scope, value, expected) in cases {
            assert_eq!(
                Scope::parse(kind, scope, value),
                expected,
                "{scope} {value}"
            );
        }
    }
}
