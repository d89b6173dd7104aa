//! Alert rules, alerts, silences, receivers and the notification outbox.

use sqlx::FromRow;

use crate::domain::{
    AlertId, AlertState, OutboxId, ReceiverId, RuleId, RuleKind, SilenceId, Subject,
};

#[derive(Debug, Clone, FromRow)]
pub struct RuleRow {
    pub id: RuleId,
    #[sqlx(flatten)]
    pub settings: RuleSettings,
    pub updated_ms: i64,
    pub updated_by: String,
}

/// A rule as an admin saves it.
#[derive(Debug, Clone, FromRow)]
pub struct RuleSettings {
    pub name: String,
    pub kind: RuleKind,
    pub scope: String,
    pub scope_value: String,
    pub threshold: f64,
    pub duration_s: i64,
    pub severity: String,
    pub enabled: bool,
}

#[derive(Debug, Clone, FromRow)]
pub struct AlertRow {
    pub id: AlertId,
    pub rule_id: RuleId,
    pub rule_name: String,
    pub severity: String,
    pub subject: Subject,
    pub subject_id: i64,
    pub subject_name: String,
    pub host_name: String,
    pub state: AlertState,
    pub active_ms: i64,
    pub fired_ms: Option<i64>,
    pub resolved_ms: Option<i64>,
    pub value: f64,
    pub evaluated_ms: i64,
    pub acked_by: Option<String>,
    pub acked_ms: Option<i64>,
    /// The label set fixed when the alert opened (JSON object); `{}` for one opened before
    /// labels were stored, until its next evaluation.
    pub labels_json: String,
    /// The annotations of its last writing (JSON object): of the last evaluation, but for the
    /// figures they quote, refreshed every four evaluations (`alerts::figures_refresh`).
    pub annotations_json: String,
}

#[derive(Debug, Clone, FromRow)]
pub struct SilenceRow {
    pub id: SilenceId,
    pub rule_id: Option<RuleId>,
    pub pattern: String,
    pub starts_ms: i64,
    pub ends_ms: i64,
    pub reason: String,
    pub created_by: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct ReceiverRow {
    pub id: ReceiverId,
    pub enabled: bool,
    pub created_ms: i64,
    #[sqlx(flatten)]
    pub settings: ReceiverSettings,
}

/// A receiver as an admin saves it.
#[derive(Debug, Clone, FromRow)]
pub struct ReceiverSettings {
    pub name: String,
    pub url: String,
    pub format: String,
    /// Labels grouped by besides `alertname`, comma-separated.
    pub group_by: String,
    pub group_wait_s: i64,
    pub group_interval_s: i64,
    /// Sent as the `Authorization` header; a secret, never shown back.
    pub auth_header: Option<String>,
    /// The CA (PEM) an https receiver's certificate is checked against.
    pub ca_pem: Option<String>,
}

impl ReceiverSettings {
    /// A receiver with Alertmanager's defaults: grouped by alertname, 30 s group wait, 5 min
    /// group interval, no auth header, the system's CAs.
    pub fn new(name: &str, url: &str, format: &str) -> ReceiverSettings {
        ReceiverSettings {
            name: name.into(),
            url: url.into(),
            format: format.into(),
            group_by: String::new(),
            group_wait_s: 30,
            group_interval_s: 300,
            auth_header: None,
            ca_pem: None,
        }
    }
}

/// A (receiver, group) with notifications waiting, and what decides when they are due.
#[derive(Debug, Clone, FromRow)]
pub struct PendingGroup {
    pub receiver_id: ReceiverId,
    pub group_key: String,
    pub first_created_ms: i64,
    /// The earliest retry time of its waiting rows.
    pub next_attempt_ms: i64,
    pub last_sent_ms: Option<i64>,
    pub group_wait_s: i64,
    pub group_interval_s: i64,
}

/// A notification due for delivery.
#[derive(Debug, Clone, FromRow)]
pub struct OutboxRow {
    pub id: OutboxId,
    pub receiver_id: ReceiverId,
    pub group_key: String,
    pub alert_id: AlertId,
    pub transition: String,
    pub payload: String,
    pub attempts: i64,
}

/// A notification to write: to which receiver, in which group, and what it says.
#[derive(Debug, Clone)]
pub struct Notify {
    pub receiver_id: ReceiverId,
    pub group_key: String,
    pub payload: String,
}

/// Where notifications stand, for the alerts page and the metrics.
#[derive(Debug, Clone, Copy, Default, FromRow)]
pub struct OutboxCounts {
    pub waiting: i64,
    pub delivered: i64,
    pub failed: i64,
}

/// A new open alert, or a change to one, with the notifications it sends (receiver id and
/// payload), all written in one transaction.
#[derive(Debug, Clone)]
pub enum AlertWrite {
    Open(NewAlert),
    Update(AlertUpdate),
    /// A pending alert whose condition cleared: dropped.
    Cancel {
        alert_id: AlertId,
    },
    Resolve(AlertResolution),
}

#[derive(Debug, Clone)]
pub struct NewAlert {
    pub rule_id: RuleId,
    pub subject: Subject,
    pub subject_id: i64,
    pub subject_name: String,
    pub host_name: String,
    pub state: AlertState,
    pub active_ms: i64,
    pub fired_ms: Option<i64>,
    pub value: f64,
    pub labels_json: String,
    pub annotations_json: String,
    pub notify: Vec<Notify>,
}

/// An open alert that stays open, written again.
#[derive(Debug, Clone)]
pub struct AlertUpdate {
    pub alert_id: AlertId,
    pub state: AlertState,
    pub fired_ms: Option<i64>,
    pub value: f64,
    /// Set only for an alert stored without labels (opened before they were kept).
    pub labels_json: Option<String>,
    pub annotations_json: String,
    pub notify: Vec<Notify>,
}

/// A firing alert whose condition cleared.
#[derive(Debug, Clone)]
pub struct AlertResolution {
    pub alert_id: AlertId,
    pub value: f64,
    pub annotations_json: String,
    pub notify: Vec<Notify>,
}
