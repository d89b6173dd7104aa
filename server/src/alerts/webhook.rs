//! Webhook receivers, as Alertmanager's webhook notifier behaves: each alert's transition is one
//! outbox row (written with the evaluation, so a restart neither loses nor repeats one); the
//! sender posts the due rows of one (receiver, group) together, as one body in Alertmanager's
//! webhook format, listing the group's changed alerts and every other alert of the group that
//! still fires (and is not silenced). A new group is first told after the receiver's group
//! wait, later changes after its group interval since the group was last told.

use serde_json::{Value, json};

use super::client::{self, PostError, Reach};
use super::context::AlertContext;
use super::labels::{self, LabelSet};
use super::measure::Measure;
use super::rules::Rule;
use crate::analysis::alerting::{Transition, silenced};
use crate::db::{AlertRow, Notify, OutboxRow, PendingGroup, ReceiverRow};
use crate::domain::{AlertId, OutboxId, ReceiverId, Subject};
use crate::error::{AppError, AppResult};
use axum::extract::FromRef;

/// Alertmanager's "no end" time in webhook bodies, for a firing alert.
const NO_END: &str = "0001-01-01T00:00:00Z";

/// Group keys starting so are rows posted alone, their payload the whole body.
const SINGLE: &str = "single:";

pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The page of an alert's subject.
pub fn subject_url(external_url: &str, subject: Subject, id: i64) -> String {
    format!("{}/{subject}s/{id}", external_url.trim_end_matches('/'))
}

/// An alert as an Alertmanager webhook body lists it: firing until `resolved_ms`.
fn webhook_alert(
    labels: &LabelSet,
    annotations: &LabelSet,
    fired_ms: i64,
    resolved_ms: Option<i64>,
    generator_url: String,
) -> Value {
    json!({
        "status": if resolved_ms.is_some() { "resolved" } else { "firing" },
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(fired_ms),
        "endsAt": resolved_ms.map_or(NO_END.to_string(), rfc3339),
        "generatorURL": generator_url,
        "fingerprint": labels::fingerprint(labels),
    })
}

/// One transition of one alert, to be told to receivers.
pub(super) struct Notice<'a> {
    pub rule: &'a Rule,
    pub measure: &'a Measure,
    pub labels: &'a LabelSet,
    pub annotations: &'a LabelSet,
    pub transition: Transition,
    pub active_ms: i64,
    pub fired_ms: i64,
    pub now_ms: i64,
    pub external_url: &'a str,
}

impl Notice<'_> {
    fn link(&self) -> String {
        subject_url(self.external_url, self.measure.subject, self.measure.id)
    }

    /// The alert as an Alertmanager webhook body lists it.
    fn alert_object(&self) -> Value {
        let resolved_ms = match self.transition {
            Transition::Firing => None,
            Transition::Resolved => Some(self.now_ms),
        };
        webhook_alert(
            self.labels,
            self.annotations,
            self.fired_ms,
            resolved_ms,
            self.link(),
        )
    }

    /// The plain JSON form: one alert per body.
    fn plain(&self) -> Value {
        json!({
            "status": self.transition.as_str(),
            "rule": {"id": self.rule.row.id, "name": self.rule.row.settings.name, "kind": self.rule.kind.as_str()},
            "severity": self.rule.row.settings.severity,
            "subject": {"kind": self.measure.subject.as_str(), "id": self.measure.id, "name": self.measure.name, "host": self.measure.host},
            "value": self.measure.value,
            "threshold": self.rule.row.settings.threshold,
            "unit": self.rule.kind.unit(),
            "summary": self.measure.summary,
            "labels": self.labels,
            "active_since": rfc3339(self.active_ms),
            "fired_at": rfc3339(self.fired_ms),
            "at": rfc3339(self.now_ms),
            "url": self.link(),
            "fingerprint": labels::fingerprint(self.labels),
        })
    }

    /// The outbox row for `receiver`.
    pub fn notify(&self, receiver: &ReceiverRow) -> Notify {
        if receiver.settings.format == "alertmanager" {
            let by = labels::parse_group_by(&receiver.settings.group_by);
            Notify {
                receiver_id: receiver.id,
                group_key: labels::group_key(&labels::group_labels(self.labels, &by)),
                payload: self.alert_object().to_string(),
            }
        } else {
            Notify {
                receiver_id: receiver.id,
                group_key: format!(
                    "{SINGLE}{}:{}:{}",
                    labels::fingerprint(self.labels),
                    self.transition.as_str(),
                    self.now_ms
                ),
                payload: self.plain().to_string(),
            }
        }
    }
}

/// An Alertmanager webhook body for one group: `alerts` are the group's alert objects (the
/// latest transition of each). Status, common labels and common annotations are computed over
/// them as Alertmanager does; nothing is truncated (Alertmanager's `max_alerts` 0).
pub fn group_body(
    receiver: &ReceiverRow,
    group_key: &str,
    external_url: &str,
    alerts: &[Value],
) -> Value {
    let set_of = |alert: &Value, field: &str| -> LabelSet {
        serde_json::from_value(alert[field].clone()).unwrap_or_default()
    };
    let label_sets: Vec<LabelSet> = alerts.iter().map(|a| set_of(a, "labels")).collect();
    let annotation_sets: Vec<LabelSet> = alerts.iter().map(|a| set_of(a, "annotations")).collect();
    let by = labels::parse_group_by(&receiver.settings.group_by);
    let group_labels = label_sets
        .first()
        .map(|l| labels::group_labels(l, &by))
        .unwrap_or_default();
    let firing = alerts.iter().any(|a| a["status"] == "firing");
    json!({
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": if firing { "firing" } else { "resolved" },
        "receiver": receiver.settings.name,
        "groupLabels": group_labels,
        "commonLabels": labels::common(&label_sets),
        "commonAnnotations": labels::common(&annotation_sets),
        "externalURL": external_url.trim_end_matches('/'),
        "alerts": alerts,
    })
}

/// When a group's waiting notifications are due: not before the first of them waited the group
/// wait, the group's last notification is a group interval old, and their retry time.
pub fn group_due_ms(g: &PendingGroup) -> i64 {
    let mut due = g
        .first_created_ms
        .saturating_add(g.group_wait_s.saturating_mul(1000))
        .max(g.next_attempt_ms);
    if let Some(last) = g.last_sent_ms {
        due = due.max(last.saturating_add(g.group_interval_s.saturating_mul(1000)));
    }
    due
}

/// The rows one POST tells: of several transitions of one alert, only the latest (an alert
/// that fired and resolved within the group wait is told resolved, as Alertmanager would).
/// Returns the alert objects, in the order of the rows.
pub fn latest_per_alert(rows: &[OutboxRow]) -> Vec<Value> {
    let mut out: Vec<(AlertId, Value)> = Vec::new();
    for row in rows {
        let Ok(alert) = serde_json::from_str::<Value>(&row.payload) else {
            continue;
        };
        match out.iter_mut().find(|(id, _)| *id == row.alert_id) {
            Some(slot) => slot.1 = alert,
            None => out.push((row.alert_id, alert)),
        }
    }
    out.into_iter().map(|(_, a)| a).collect()
}

/// A firing alert, as stored, as the body of `group_key` for `receiver` lists it; `None` when
/// it belongs to another group (or was opened before labels were stored).
pub fn still_firing_in(
    alert: &AlertRow,
    receiver: &ReceiverRow,
    group_key: &str,
    external_url: &str,
) -> Option<Value> {
    let labels = labels::parse_set(&alert.labels_json);
    let fired_ms = alert.fired_ms?;
    let by = labels::parse_group_by(&receiver.settings.group_by);
    if labels.is_empty() || labels::group_key(&labels::group_labels(&labels, &by)) != group_key {
        return None;
    }
    Some(webhook_alert(
        &labels,
        &labels::parse_set(&alert.annotations_json),
        fired_ms,
        None,
        subject_url(external_url, alert.subject, alert.subject_id),
    ))
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

/// When the next waiting group is due, if any is waiting.
pub async fn next_delivery_ms(state: &AlertContext) -> AppResult<Option<i64>> {
    Ok(state
        .db
        .pending_groups()
        .await?
        .iter()
        .map(group_due_ms)
        .min())
}

/// Posts every group due now; returns how many notifications (alert transitions) were
/// delivered. Each receiver's groups are posted by a task of its own, so a receiver that is
/// slow to answer (up to the 10 s timeout) holds up nobody else's.
pub async fn deliver_due<S>(state: &S) -> AppResult<usize>
where
    AlertContext: FromRef<S>,
{
    let state = &AlertContext::from_ref(state);
    let mut per_receiver: Vec<(ReceiverId, Vec<PendingGroup>)> = Vec::new();
    let now_ms = state.clock.now_ms();
    // Only groups due now: a receiver with none has nothing to read or post this round.
    for group in state.db.pending_groups().await? {
        if group_due_ms(&group) > now_ms {
            continue;
        }
        match per_receiver
            .iter_mut()
            .find(|(id, _)| *id == group.receiver_id)
        {
            Some((_, groups)) => groups.push(group),
            None => per_receiver.push((group.receiver_id, vec![group])),
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (receiver_id, groups) in per_receiver {
        let state = state.clone();
        tasks.spawn(async move { deliver_groups(&state, receiver_id, groups).await });
    }
    let mut delivered = 0;
    let mut failed = None;
    while let Some(done) = tasks.join_next().await {
        match done.map_err(|e| AppError::stopped("a notification task", e))? {
            Ok(n) => delivered += n,
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(delivered),
    }
}

/// Posts `groups`, the due groups of one receiver, one after the other.
async fn deliver_groups(
    state: &AlertContext,
    receiver_id: ReceiverId,
    groups: Vec<PendingGroup>,
) -> AppResult<usize> {
    let mut delivered = 0;
    let Some(receiver) = state.db.receiver(receiver_id).await? else {
        return Ok(0);
    };
    let external_url = state.external_url.clone();
    // Read once for all the groups of this round: what still fires, and what is silenced.
    let round_ms = state.clock.now_ms();
    let firing: Vec<AlertRow> = state
        .db
        .open_alerts()
        .await?
        .into_iter()
        .filter(|a| a.state == "firing")
        .collect();
    let silences = super::rules::silences_in_force(&state.db, round_ms).await?;
    'groups: for group in groups {
        let now_ms = state.clock.now_ms();
        let rows = state
            .db
            .group_notifications(group.receiver_id, &group.group_key, now_ms)
            .await?;
        if rows.is_empty() {
            continue;
        }
        let single = group.group_key.starts_with(SINGLE);
        let bodies: Vec<(Vec<&OutboxRow>, String)> = if single {
            rows.iter().map(|r| (vec![r], r.payload.clone())).collect()
        } else {
            let mut alerts = latest_per_alert(&rows);
            // As Alertmanager's, a group's notification lists every alert of the group that
            // still fires, not only those that changed: a receiver sees the whole group.
            let told: Vec<AlertId> = rows.iter().map(|r| r.alert_id).collect();
            alerts.extend(
                firing
                    .iter()
                    .filter(|a| !told.contains(&a.id))
                    .filter(|a| {
                        !silenced(
                            &silences,
                            a.rule_id.0,
                            &a.subject_name,
                            &a.host_name,
                            round_ms,
                        )
                    })
                    .filter_map(|a| still_firing_in(a, &receiver, &group.group_key, &external_url)),
            );
            let body = group_body(&receiver, &group.group_key, &external_url, &alerts);
            vec![(rows.iter().collect(), body.to_string())]
        };
        for (told, body) in bodies {
            let sent = post(&receiver, body, &state.reach).await?;
            let now_ms = state.clock.now_ms();
            let ids: Vec<OutboxId> = told.iter().map(|r| r.id).collect();
            match sent {
                Ok(()) => {
                    let key = if single {
                        None
                    } else {
                        Some(group.group_key.as_str())
                    };
                    state
                        .db
                        .group_delivered(receiver.id, key, &ids, now_ms)
                        .await?;
                    for _ in &ids {
                        state.metrics.notification("delivered");
                    }
                    tracing::info!(receiver = ?receiver.settings.name, group = ?group.group_key, alerts = ids.len(), "notification delivered");
                    delivered += ids.len();
                }
                Err(e) => {
                    let attempts = told.iter().map(|r| r.attempts).max().unwrap_or(0) + 1;
                    let next = match &e {
                        PostError::Retry(_) if attempts < MAX_ATTEMPTS => {
                            let random = getrandom::u32().unwrap_or(0);
                            Some(now_ms + retry_delay_ms(attempts, state.retry_base_ms, random))
                        }
                        _ => None,
                    };
                    for id in &ids {
                        state
                            .db
                            .notification_failed(*id, &e.to_string(), next, now_ms)
                            .await?;
                        state.metrics.notification(if next.is_some() {
                            "retried"
                        } else {
                            "given_up"
                        });
                    }
                    tracing::warn!(receiver = ?receiver.settings.name, group = ?group.group_key, attempts, error = %e, given_up = next.is_none(), "notification failed");
                    if matches!(e, PostError::Retry(_)) {
                        // The receiver is down or slow (each try may take the whole timeout):
                        // its other groups wait for the next round rather than each taking
                        // the timeout again while other receivers' rounds wait for this one.
                        break 'groups;
                    }
                }
            }
        }
    }
    Ok(delivered)
}

/// One POST to a receiver, off the async threads.
async fn post(
    receiver: &ReceiverRow,
    body: String,
    reach: &Reach,
) -> AppResult<Result<(), PostError>> {
    let url = receiver.settings.url.clone();
    let reach = reach.clone();
    let auth = receiver
        .settings
        .auth_header
        .clone()
        .filter(|a| !a.is_empty());
    let ca = receiver.settings.ca_pem.clone().filter(|c| !c.is_empty());
    tokio::task::spawn_blocking(move || {
        let agent = client::agent(
            ca.as_deref().map(str::as_bytes),
            client::POST_TIMEOUT,
            &reach,
        )
        .map_err(PostError::Refused)?;
        client::post_json(&agent, &url, auth.as_deref(), &body)
    })
    .await
    .map_err(|e| AppError::stopped("a notification task", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::ReceiverSettings;

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

    fn pending(first: i64, next: i64, last: Option<i64>) -> PendingGroup {
        PendingGroup {
            receiver_id: ReceiverId(1),
            group_key: "k".into(),
            first_created_ms: first,
            next_attempt_ms: next,
            last_sent_ms: last,
            group_wait_s: 30,
            group_interval_s: 300,
        }
    }

    #[test]
    fn a_group_waits_its_group_wait_then_its_group_interval() {
        let cases = [
            ("new group: group wait", pending(1_000, 1_000, None), 31_000),
            (
                "told 10 s ago: group interval",
                pending(100_000, 100_000, Some(90_000)),
                390_000,
            ),
            (
                "told long ago: group wait",
                pending(1_000_000, 1_000_000, Some(0)),
                1_030_000,
            ),
            ("a retry later still", pending(1_000, 50_000, None), 50_000),
        ];
        for (what, g, expected) in cases {
            assert_eq!(group_due_ms(&g), expected, "{what}");
        }
    }

    fn row(id: i64, alert_id: i64, status: &str) -> OutboxRow {
        OutboxRow {
            id: OutboxId(id),
            receiver_id: ReceiverId(1),
            group_key: "k".into(),
            alert_id: AlertId(alert_id),
            transition: status.into(),
            payload: json!({"status": status, "labels": {"alertname": "r", "guest": alert_id.to_string(), "host": "hv1"}, "annotations": {"summary": format!("s{alert_id}"), "x": "same"}}).to_string(),
            attempts: 0,
        }
    }

    #[test]
    fn a_group_body_is_computed_over_its_alerts() {
        let receiver = ReceiverRow {
            id: ReceiverId(1),
            enabled: true,
            created_ms: 0,
            settings: ReceiverSettings {
                group_by: "host".into(),
                group_wait_s: 0,
                group_interval_s: 0,
                ..ReceiverSettings::new("team", "", "alertmanager")
            },
        };
        // Alert 1 fired and resolved before the group was told: told resolved, once.
        let rows = [
            row(1, 1, "firing"),
            row(2, 2, "firing"),
            row(3, 1, "resolved"),
        ];
        let alerts = latest_per_alert(&rows);
        assert_eq!(alerts.len(), 2);
        let body = group_body(&receiver, "key", "https://t.example/", &alerts);
        assert_eq!(body["status"], "firing");
        assert_eq!(body["alerts"][0]["status"], "resolved");
        assert_eq!(
            body["groupLabels"],
            json!({"alertname": "r", "host": "hv1"})
        );
        assert_eq!(
            body["commonLabels"],
            json!({"alertname": "r", "host": "hv1"})
        );
        assert_eq!(body["commonAnnotations"], json!({"x": "same"}));
        assert_eq!(body["externalURL"], "https://t.example");
        let resolved = latest_per_alert(&[row(3, 1, "resolved")]);
        assert_eq!(
            group_body(&receiver, "key", "", &resolved)["status"],
            "resolved"
        );
    }
}
