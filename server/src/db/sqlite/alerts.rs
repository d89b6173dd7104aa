//! Alert rules, alerts, silences, receivers and the notification outbox, in SQLite.

use super::store::SqliteDb;
use crate::db::alerts::{
    AlertRow, AlertWrite, NewReceiver, NewRule, OutboxCounts, OutboxRow, PendingGroup, ReceiverRow,
    RuleRow, SilenceRow,
};
use crate::db::error::{StoreError, StoreResult};
use crate::domain::{AlertId, OutboxId, ReceiverId, RuleId, SilenceId};

const RECEIVER_COLUMNS: &str = "id, name, url, format, enabled, created_ms, group_by,
    group_wait_s, group_interval_s, auth_header, ca_pem";

const ALERT_COLUMNS: &str =
    "a.id, a.rule_id, r.name AS rule_name, r.severity, a.subject, a.subject_id,
    a.subject_name, a.host_name, a.state, a.active_ms, a.fired_ms, a.resolved_ms, a.value,
    a.evaluated_ms, a.acked_by, a.acked_ms, a.labels_json, a.annotations_json";

impl SqliteDb {
    pub async fn alert_rules(&self) -> StoreResult<Vec<RuleRow>> {
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
        id: Option<RuleId>,
        rule: &NewRule,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<RuleId> {
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
            .bind(rule.kind)
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
        let saved: Option<RuleId> = query.fetch_optional(&self.pool).await?;
        saved.ok_or_else(|| StoreError::NotFound("there is no such rule".into()))
    }

    /// Deletes a rule with its alerts and their notifications still waiting.
    pub async fn delete_alert_rule(&self, id: RuleId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM alert_rules WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("there is no such rule".into()));
        }
        Ok(())
    }

    /// Pending and firing alerts, oldest first.
    pub async fn open_alerts(&self) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state IN ('pending', 'firing') ORDER BY a.active_ms, a.id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Resolved alerts, newest first.
    pub async fn resolved_alerts(&self, limit: i64) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'resolved' ORDER BY a.resolved_ms DESC, a.id DESC LIMIT ?"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every alert a guest or host has had, newest first.
    pub async fn alerts_of(&self, subject: &str, subject_id: i64) -> StoreResult<Vec<AlertRow>> {
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
    pub async fn write_alerts(&self, writes: Vec<AlertWrite>, now_ms: i64) -> StoreResult<()> {
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
                    labels_json,
                    annotations_json,
                    notify,
                } => {
                    let id: AlertId = sqlx::query_scalar(
                        "INSERT INTO alerts (rule_id, subject, subject_id, subject_name, host_name,
                            state, active_ms, fired_ms, value, evaluated_ms, labels_json,
                            annotations_json)
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
                    .bind(labels_json)
                    .bind(annotations_json)
                    .fetch_one(&mut *tx)
                    .await?;
                    (id, notify, "firing")
                }
                AlertWrite::Update {
                    alert_id,
                    state,
                    fired_ms,
                    value,
                    labels_json,
                    annotations_json,
                    notify,
                } => {
                    sqlx::query(
                        "UPDATE alerts SET state = ?, fired_ms = ?, value = ?, evaluated_ms = ?,
                            labels_json = COALESCE(?, labels_json), annotations_json = ?
                         WHERE id = ?",
                    )
                    .bind(state)
                    .bind(fired_ms)
                    .bind(value)
                    .bind(now_ms)
                    .bind(labels_json)
                    .bind(annotations_json)
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
                    annotations_json,
                    notify,
                } => {
                    sqlx::query(
                        "UPDATE alerts SET state = 'resolved', resolved_ms = ?, value = ?,
                            evaluated_ms = ?, annotations_json = ?
                         WHERE id = ?",
                    )
                    .bind(now_ms)
                    .bind(value)
                    .bind(now_ms)
                    .bind(annotations_json)
                    .bind(alert_id)
                    .execute(&mut *tx)
                    .await?;
                    (alert_id, notify, "resolved")
                }
            };
            for n in notify {
                // The unique (receiver, alert, transition) makes a second notification of the
                // same transition impossible, whatever happens around it.
                sqlx::query(
                    "INSERT INTO outbox (receiver_id, alert_id, transition, payload, created_ms,
                        next_attempt_ms, group_key)
                     VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (receiver_id, alert_id, transition) DO NOTHING",
                )
                .bind(n.receiver_id)
                .bind(alert_id)
                .bind(transition)
                .bind(n.payload)
                .bind(now_ms)
                .bind(now_ms)
                .bind(n.group_key)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Marks an open alert acknowledged; `false` if there is no such open alert.
    pub async fn acknowledge_alert(&self, id: AlertId, by: &str, now_ms: i64) -> StoreResult<bool> {
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
    pub async fn silences(&self, now_ms: i64) -> StoreResult<Vec<SilenceRow>> {
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
        rule_id: Option<RuleId>,
        pattern: &str,
        starts_ms: i64,
        ends_ms: i64,
        reason: &str,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<SilenceId> {
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
    pub async fn expire_silence(&self, id: SilenceId, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE silences SET ends_ms = ? WHERE id = ? AND ends_ms > ?")
            .bind(now_ms)
            .bind(id)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn receivers(&self) -> StoreResult<Vec<ReceiverRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RECEIVER_COLUMNS} FROM receivers ORDER BY name"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn receiver(&self, id: ReceiverId) -> StoreResult<Option<ReceiverRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RECEIVER_COLUMNS} FROM receivers WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn insert_receiver(&self, r: &NewReceiver, now_ms: i64) -> StoreResult<ReceiverId> {
        let id: Option<ReceiverId> = sqlx::query_scalar(
            "INSERT INTO receivers (name, url, format, created_ms, group_by, group_wait_s,
                group_interval_s, auth_header, ca_pem)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(&r.name)
        .bind(&r.url)
        .bind(&r.format)
        .bind(now_ms)
        .bind(&r.group_by)
        .bind(r.group_wait_s)
        .bind(r.group_interval_s)
        .bind(&r.auth_header)
        .bind(&r.ca_pem)
        .fetch_optional(&self.pool)
        .await?;
        id.ok_or_else(|| StoreError::Conflict(format!("there is already a receiver {:?}", r.name)))
    }

    /// Changes a receiver; `None` for the auth header or CA keeps the stored one, `Some("")`
    /// removes it.
    pub async fn update_receiver(&self, id: ReceiverId, r: &NewReceiver) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE receivers SET name = ?, url = ?, format = ?, group_by = ?, group_wait_s = ?,
                group_interval_s = ?,
                auth_header = CASE WHEN ? IS NULL THEN auth_header ELSE NULLIF(?, '') END,
                ca_pem = CASE WHEN ? IS NULL THEN ca_pem ELSE NULLIF(?, '') END
             WHERE id = ?",
        )
        .bind(&r.name)
        .bind(&r.url)
        .bind(&r.format)
        .bind(&r.group_by)
        .bind(r.group_wait_s)
        .bind(r.group_interval_s)
        .bind(&r.auth_header)
        .bind(&r.auth_header)
        .bind(&r.ca_pem)
        .bind(&r.ca_pem)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                StoreError::Conflict(format!("there is already a receiver {:?}", r.name))
            }
            e => e.into(),
        })?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("there is no such receiver".into()));
        }
        Ok(())
    }

    /// Deletes a receiver with the notifications still waiting for it.
    pub async fn delete_receiver(&self, id: ReceiverId) -> StoreResult<()> {
        let done = sqlx::query("DELETE FROM receivers WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("there is no such receiver".into()));
        }
        Ok(())
    }

    /// Every (receiver, group) of an enabled receiver with notifications waiting.
    pub async fn pending_groups(&self) -> StoreResult<Vec<PendingGroup>> {
        Ok(sqlx::query_as(
            "SELECT o.receiver_id, o.group_key, MIN(o.created_ms) AS first_created_ms,
                    MIN(o.next_attempt_ms) AS next_attempt_ms, g.last_sent_ms,
                    r.group_wait_s, r.group_interval_s
             FROM outbox o
             JOIN receivers r ON r.id = o.receiver_id
             LEFT JOIN receiver_groups g
                ON g.receiver_id = o.receiver_id AND g.group_key = o.group_key
             WHERE o.delivered_ms IS NULL AND o.failed_ms IS NULL AND r.enabled
             GROUP BY o.receiver_id, o.group_key
             ORDER BY first_created_ms",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// The notifications of one (receiver, group) whose attempt is due by `now_ms`, oldest
    /// first.
    pub async fn group_notifications(
        &self,
        receiver_id: ReceiverId,
        group_key: &str,
        now_ms: i64,
    ) -> StoreResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as(
            "SELECT id, receiver_id, group_key, alert_id, transition, payload, attempts
             FROM outbox
             WHERE receiver_id = ? AND group_key = ? AND delivered_ms IS NULL
               AND failed_ms IS NULL AND next_attempt_ms <= ?
             ORDER BY created_ms, id",
        )
        .bind(receiver_id)
        .bind(group_key)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Marks the notifications of one POST delivered, and the group as notified now.
    /// `group_key` None: rows posted alone, whose group is not remembered.
    pub async fn group_delivered(
        &self,
        receiver_id: ReceiverId,
        group_key: Option<&str>,
        ids: &[OutboxId],
        now_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for id in ids {
            sqlx::query("UPDATE outbox SET delivered_ms = ?, attempts = attempts + 1 WHERE id = ?")
                .bind(now_ms)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(group_key) = group_key {
            sqlx::query(
                "INSERT INTO receiver_groups (receiver_id, group_key, last_sent_ms) VALUES (?, ?, ?)
                 ON CONFLICT (receiver_id, group_key)
                 DO UPDATE SET last_sent_ms = excluded.last_sent_ms",
            )
            .bind(receiver_id)
            .bind(group_key)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Alerts Alertmanager is told about at `now_ms`: every firing one, and those that fired
    /// and resolved at `resolved_since_ms` or later.
    pub async fn alerts_to_announce(&self, resolved_since_ms: i64) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'firing'
                OR (a.state = 'resolved' AND a.resolved_ms >= ? AND a.fired_ms IS NOT NULL)
             ORDER BY a.id"
        ))
        .bind(resolved_since_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records a failed attempt: tried again at `next_attempt_ms`, or given up when `None`.
    pub async fn notification_failed(
        &self,
        id: OutboxId,
        error: &str,
        next_attempt_ms: Option<i64>,
        now_ms: i64,
    ) -> StoreResult<()> {
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

    pub async fn outbox_counts(&self) -> StoreResult<OutboxCounts> {
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
