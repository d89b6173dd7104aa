//! Alert rules, alerts, silences, receivers and the notification outbox.

use sqlx::FromRow;

use super::Db;
use crate::error::{AppError, AppResult};

#[derive(Debug, Clone, FromRow)]
pub struct RuleRow {
    pub id: i64,
    pub name: String,
    pub kind: String,
    pub scope: String,
    pub scope_value: String,
    pub threshold: f64,
    pub duration_s: i64,
    pub severity: String,
    pub enabled: bool,
    pub updated_ms: i64,
    pub updated_by: String,
}

/// A rule as an admin saves it.
#[derive(Debug, Clone)]
pub struct NewRule {
    pub name: String,
    pub kind: String,
    pub scope: String,
    pub scope_value: String,
    pub threshold: f64,
    pub duration_s: i64,
    pub severity: String,
    pub enabled: bool,
}

impl From<RuleRow> for NewRule {
    /// A stored rule as it would be saved again, to change some of it.
    fn from(r: RuleRow) -> Self {
        NewRule {
            name: r.name,
            kind: r.kind,
            scope: r.scope,
            scope_value: r.scope_value,
            threshold: r.threshold,
            duration_s: r.duration_s,
            severity: r.severity,
            enabled: r.enabled,
        }
    }
}

#[derive(Debug, Clone, FromRow)]
pub struct AlertRow {
    pub id: i64,
    pub rule_id: i64,
    pub rule_name: String,
    pub severity: String,
    pub subject: String,
    pub subject_id: i64,
    pub subject_name: String,
    pub host_name: String,
    pub state: String,
    pub active_ms: i64,
    pub fired_ms: Option<i64>,
    pub resolved_ms: Option<i64>,
    pub value: f64,
    pub evaluated_ms: i64,
    pub acked_by: Option<String>,
    pub acked_ms: Option<i64>,
}

#[derive(Debug, Clone, FromRow)]
pub struct SilenceRow {
    pub id: i64,
    pub rule_id: Option<i64>,
    pub pattern: String,
    pub starts_ms: i64,
    pub ends_ms: i64,
    pub reason: String,
    pub created_by: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct ReceiverRow {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub format: String,
    pub enabled: bool,
    pub created_ms: i64,
}

/// A notification due for delivery.
#[derive(Debug, Clone, FromRow)]
pub struct OutboxRow {
    pub id: i64,
    pub url: String,
    pub receiver: String,
    pub alert_id: i64,
    pub transition: String,
    pub payload: String,
    pub attempts: i64,
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
    Open {
        rule_id: i64,
        subject: &'static str,
        subject_id: i64,
        subject_name: String,
        host_name: String,
        state: &'static str,
        active_ms: i64,
        fired_ms: Option<i64>,
        value: f64,
        /// Built once the alert has its id.
        notify: Vec<(i64, String)>,
    },
    Update {
        alert_id: i64,
        state: &'static str,
        fired_ms: Option<i64>,
        value: f64,
        notify: Vec<(i64, String)>,
    },
    Cancel {
        alert_id: i64,
    },
    Resolve {
        alert_id: i64,
        value: f64,
        notify: Vec<(i64, String)>,
    },
}

const ALERT_COLUMNS: &str =
    "a.id, a.rule_id, r.name AS rule_name, r.severity, a.subject, a.subject_id,
    a.subject_name, a.host_name, a.state, a.active_ms, a.fired_ms, a.resolved_ms, a.value,
    a.evaluated_ms, a.acked_by, a.acked_ms";

impl Db {
    pub async fn alert_rules(&self) -> AppResult<Vec<RuleRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, kind, scope, scope_value, threshold, duration_s, severity, enabled,
                    updated_ms, updated_by
             FROM alert_rules ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Adds a rule (`id` None) or replaces one; returns its id.
    pub async fn save_alert_rule(
        &self,
        id: Option<i64>,
        rule: &NewRule,
        by: &str,
        now_ms: i64,
    ) -> AppResult<i64> {
        // Both statements take the rule's values in the same order; an update adds the id.
        let sql = match id {
            None => {
                "INSERT INTO alert_rules (name, kind, scope, scope_value, threshold, duration_s,
                    severity, enabled, updated_ms, updated_by)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
            }
            Some(_) => {
                "UPDATE alert_rules SET name = ?, kind = ?, scope = ?, scope_value = ?,
                    threshold = ?, duration_s = ?, severity = ?, enabled = ?, updated_ms = ?,
                    updated_by = ?
                 WHERE id = ? RETURNING id"
            }
        };
        let mut query = sqlx::query_scalar(sql)
            .bind(&rule.name)
            .bind(&rule.kind)
            .bind(&rule.scope)
            .bind(&rule.scope_value)
            .bind(rule.threshold)
            .bind(rule.duration_s)
            .bind(&rule.severity)
            .bind(rule.enabled)
            .bind(now_ms)
            .bind(by);
        if let Some(id) = id {
            query = query.bind(id);
        }
        let saved: Option<i64> = query.fetch_optional(&self.pool).await?;
        saved.ok_or_else(|| AppError::NotFound("there is no such rule".into()))
    }

    /// Deletes a rule with its alerts and their notifications still waiting.
    pub async fn delete_alert_rule(&self, id: i64) -> AppResult<()> {
        let done = sqlx::query("DELETE FROM alert_rules WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(AppError::NotFound("there is no such rule".into()));
        }
        Ok(())
    }

    /// Pending and firing alerts, oldest first.
    pub async fn open_alerts(&self) -> AppResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state IN ('pending', 'firing') ORDER BY a.active_ms, a.id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Resolved alerts, newest first.
    pub async fn resolved_alerts(&self, limit: i64) -> AppResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'resolved' ORDER BY a.resolved_ms DESC, a.id DESC LIMIT ?"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every alert a guest or host has had, newest first.
    pub async fn alerts_of(&self, subject: &str, subject_id: i64) -> AppResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.subject = ? AND a.subject_id = ? ORDER BY a.active_ms DESC, a.id DESC
             LIMIT 100"
        ))
        .bind(subject)
        .bind(subject_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Writes one evaluation's alert changes and their notifications, all or nothing.
    pub async fn write_alerts(&self, writes: Vec<AlertWrite>, now_ms: i64) -> AppResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        for write in writes {
            let (alert_id, notify, transition) = match write {
                AlertWrite::Open {
                    rule_id,
                    subject,
                    subject_id,
                    subject_name,
                    host_name,
                    state,
                    active_ms,
                    fired_ms,
                    value,
                    notify,
                } => {
                    let id: i64 = sqlx::query_scalar(
                        "INSERT INTO alerts (rule_id, subject, subject_id, subject_name, host_name,
                            state, active_ms, fired_ms, value, evaluated_ms)
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    )
                    .bind(rule_id)
                    .bind(subject)
                    .bind(subject_id)
                    .bind(subject_name)
                    .bind(host_name)
                    .bind(state)
                    .bind(active_ms)
                    .bind(fired_ms)
                    .bind(value)
                    .bind(now_ms)
                    .fetch_one(&mut *tx)
                    .await?;
                    (id, notify, "firing")
                }
                AlertWrite::Update {
                    alert_id,
                    state,
                    fired_ms,
                    value,
                    notify,
                } => {
                    sqlx::query(
                        "UPDATE alerts SET state = ?, fired_ms = ?, value = ?, evaluated_ms = ?
                         WHERE id = ?",
                    )
                    .bind(state)
                    .bind(fired_ms)
                    .bind(value)
                    .bind(now_ms)
                    .bind(alert_id)
                    .execute(&mut *tx)
                    .await?;
                    (alert_id, notify, "firing")
                }
                AlertWrite::Cancel { alert_id } => {
                    sqlx::query("DELETE FROM alerts WHERE id = ? AND state = 'pending'")
                        .bind(alert_id)
                        .execute(&mut *tx)
                        .await?;
                    continue;
                }
                AlertWrite::Resolve {
                    alert_id,
                    value,
                    notify,
                } => {
                    sqlx::query(
                        "UPDATE alerts SET state = 'resolved', resolved_ms = ?, value = ?,
                            evaluated_ms = ?
                         WHERE id = ?",
                    )
                    .bind(now_ms)
                    .bind(value)
                    .bind(now_ms)
                    .bind(alert_id)
                    .execute(&mut *tx)
                    .await?;
                    (alert_id, notify, "resolved")
                }
            };
            for (receiver_id, payload) in notify {
                // The unique (receiver, alert, transition) makes a second notification of the
                // same transition impossible, whatever happens around it.
                sqlx::query(
                    "INSERT INTO outbox (receiver_id, alert_id, transition, payload, created_ms,
                        next_attempt_ms)
                     VALUES (?, ?, ?, ?, ?, ?)
                     ON CONFLICT (receiver_id, alert_id, transition) DO NOTHING",
                )
                .bind(receiver_id)
                .bind(alert_id)
                .bind(transition)
                .bind(payload)
                .bind(now_ms)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Marks an open alert acknowledged; `false` if there is no such open alert.
    pub async fn acknowledge_alert(&self, id: i64, by: &str, now_ms: i64) -> AppResult<bool> {
        let done = sqlx::query(
            "UPDATE alerts SET acked_by = ?, acked_ms = ?
             WHERE id = ? AND state IN ('pending', 'firing')",
        )
        .bind(by)
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Silences that have not ended by `now_ms`, soonest ending first.
    pub async fn silences(&self, now_ms: i64) -> AppResult<Vec<SilenceRow>> {
        Ok(sqlx::query_as(
            "SELECT id, rule_id, pattern, starts_ms, ends_ms, reason, created_by, created_ms
             FROM silences WHERE ends_ms > ? ORDER BY ends_ms, id",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn insert_silence(
        &self,
        rule_id: Option<i64>,
        pattern: &str,
        starts_ms: i64,
        ends_ms: i64,
        reason: &str,
        by: &str,
        now_ms: i64,
    ) -> AppResult<i64> {
        Ok(sqlx::query_scalar(
            "INSERT INTO silences (rule_id, pattern, starts_ms, ends_ms, reason, created_by, created_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(rule_id)
        .bind(pattern)
        .bind(starts_ms)
        .bind(ends_ms)
        .bind(reason)
        .bind(by)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Ends a silence now; `false` if there is no such silence still running.
    pub async fn expire_silence(&self, id: i64, now_ms: i64) -> AppResult<bool> {
        let done = sqlx::query("UPDATE silences SET ends_ms = ? WHERE id = ? AND ends_ms > ?")
            .bind(now_ms)
            .bind(id)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn receivers(&self) -> AppResult<Vec<ReceiverRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, url, format, enabled, created_ms FROM receivers ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn insert_receiver(
        &self,
        name: &str,
        url: &str,
        format: &str,
        now_ms: i64,
    ) -> AppResult<i64> {
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO receivers (name, url, format, created_ms) VALUES (?, ?, ?, ?)
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(name)
        .bind(url)
        .bind(format)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        id.ok_or_else(|| AppError::Conflict(format!("there is already a receiver {name:?}")))
    }

    /// Deletes a receiver with the notifications still waiting for it.
    pub async fn delete_receiver(&self, id: i64) -> AppResult<()> {
        let done = sqlx::query("DELETE FROM receivers WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(AppError::NotFound("there is no such receiver".into()));
        }
        Ok(())
    }

    /// Notifications due by `now_ms` to enabled receivers, oldest first.
    pub async fn due_notifications(&self, now_ms: i64, limit: i64) -> AppResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as(
            "SELECT o.id, r.url, r.name AS receiver, o.alert_id, o.transition, o.payload, o.attempts
             FROM outbox o JOIN receivers r ON r.id = o.receiver_id
             WHERE o.delivered_ms IS NULL AND o.failed_ms IS NULL AND o.next_attempt_ms <= ?
               AND r.enabled
             ORDER BY o.next_attempt_ms, o.id LIMIT ?",
        )
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// When the next waiting notification is due, if any is waiting.
    pub async fn next_notification_ms(&self) -> AppResult<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(next_attempt_ms) FROM outbox WHERE delivered_ms IS NULL AND failed_ms IS NULL",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    pub async fn notification_delivered(&self, id: i64, now_ms: i64) -> AppResult<()> {
        sqlx::query("UPDATE outbox SET delivered_ms = ?, attempts = attempts + 1 WHERE id = ?")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a failed attempt: tried again at `next_attempt_ms`, or given up when `None`.
    pub async fn notification_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_ms: Option<i64>,
        now_ms: i64,
    ) -> AppResult<()> {
        sqlx::query(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?,
                next_attempt_ms = COALESCE(?, next_attempt_ms),
                failed_ms = CASE WHEN ? IS NULL THEN ? END
             WHERE id = ?",
        )
        .bind(error)
        .bind(next_attempt_ms)
        .bind(next_attempt_ms)
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn outbox_counts(&self) -> AppResult<OutboxCounts> {
        Ok(sqlx::query_as(
            "SELECT COALESCE(SUM(delivered_ms IS NULL AND failed_ms IS NULL), 0) AS waiting,
                    COALESCE(SUM(delivered_ms IS NOT NULL), 0) AS delivered,
                    COALESCE(SUM(failed_ms IS NOT NULL), 0) AS failed
             FROM outbox",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
