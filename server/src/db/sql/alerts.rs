//! Alert rules, alerts, silences, receivers and the notification outbox. Waiting groups are
//! grouped by every column they select (PostgreSQL refuses a bare column SQLite takes from "some
//! row" of the group), the outbox is counted with `FILTER`, and receivers and groups are
//! sorted byte by byte.

use super::dialect::{BYTEWISE, Store, id_list, in_id_list};
use crate::db::alerts::{
    AlertRow, OutboxCounts, OutboxRow, PendingGroup, ReceiverRow, ReceiverSettings, RuleRow,
    RuleSettings, SilenceRow,
};
use crate::db::error::{StoreError, StoreResult};
use crate::domain::{AlertId, AlertState, OutboxId, ReceiverId, RuleId, SilenceId, Subject};

const RECEIVER_COLUMNS: &str = "id, name, url, format, enabled, created_ms, group_by,
    group_wait_s, group_interval_s, auth_header, ca_pem";

const ALERT_COLUMNS: &str =
    "a.id, a.rule_id, r.name AS rule_name, r.severity, a.subject, a.subject_id,
    a.subject_name, a.host_name, a.state, a.active_ms, a.fired_ms, a.resolved_ms, a.value,
    a.evaluated_ms, a.acked_by, a.acked_ms, a.labels_json, a.annotations_json";

impl Store {
    pub async fn alert_rules(&self) -> StoreResult<Vec<RuleRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, kind, scope, scope_value, threshold, duration_s, severity, enabled,
                    updated_ms, updated_by
             FROM alert_rules ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn save_alert_rule(
        &self,
        id: Option<RuleId>,
        rule: &RuleSettings,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<RuleId> {
        // Both statements take the rule's values as $1..$10; an update adds the id as $11.
        let sql = match id {
            None => {
                "INSERT INTO alert_rules (name, kind, scope, scope_value, threshold, duration_s,
                    severity, enabled, updated_ms, updated_by)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id"
            }
            Some(_) => {
                "UPDATE alert_rules SET name = $1, kind = $2, scope = $3, scope_value = $4,
                    threshold = $5, duration_s = $6, severity = $7, enabled = $8,
                    updated_ms = $9, updated_by = $10
                 WHERE id = $11 RETURNING id"
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

    pub async fn delete_alert_rule(&self, id: RuleId) -> StoreResult<()> {
        self.delete_cascading("alert_rules", id.0, "there is no such rule")
            .await
    }

    /// Deletes the row `id` of `table` with what refers to it, or says `missing`. Under the
    /// write lock: the cascade locks alerts and notifications in another order than the
    /// evaluation's writes do, which could deadlock with them.
    async fn delete_cascading(&self, table: &str, id: i64, missing: &str) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(&format!("DELETE FROM {table} WHERE id = $1"))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(missing.into()));
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn open_alerts(&self) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state IN ('pending', 'firing') ORDER BY a.active_ms, a.id"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn open_alert_counts(&self) -> StoreResult<Vec<(AlertState, String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT a.state, r.severity, COUNT(*) FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state IN ('pending', 'firing') GROUP BY a.state, r.severity",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn firing_alerts(&self, limit: i64) -> StoreResult<(Vec<AlertRow>, i64)> {
        let mut conn = self.pool.acquire().await?;
        let oldest = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'firing' ORDER BY a.active_ms, a.id LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
        let count = sqlx::query_scalar("SELECT COUNT(*) FROM alerts WHERE state = 'firing'")
            .fetch_one(&mut *conn)
            .await?;
        Ok((oldest, count))
    }

    pub async fn resolved_alerts(&self, limit: i64) -> StoreResult<Vec<AlertRow>> {
        // A negative limit is none (PostgreSQL refuses one, SQLite a NULL).
        let limit = if limit < 0 { i64::MAX } else { limit };
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'resolved' ORDER BY a.resolved_ms DESC, a.id DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn alerts_of(&self, subject: Subject, subject_id: i64) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.subject = $1 AND a.subject_id = $2 ORDER BY a.active_ms DESC, a.id DESC
             LIMIT 100"
        ))
        .bind(subject)
        .bind(subject_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn acknowledge_alert(&self, id: AlertId, by: &str, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE alerts SET acked_by = $1, acked_ms = $2
             WHERE id = $3 AND state IN ('pending', 'firing')",
        )
        .bind(by)
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn silences(&self, now_ms: i64) -> StoreResult<Vec<SilenceRow>> {
        Ok(sqlx::query_as(
            "SELECT id, rule_id, pattern, starts_ms, ends_ms, reason, created_by, created_ms
             FROM silences WHERE ends_ms > $1 ORDER BY ends_ms, id",
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
            "INSERT INTO silences (rule_id, pattern, starts_ms, ends_ms, reason, created_by,
                created_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
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

    pub async fn expire_silence(&self, id: SilenceId, now_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE silences SET ends_ms = $1 WHERE id = $2 AND ends_ms > $1")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn receivers(&self) -> StoreResult<Vec<ReceiverRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RECEIVER_COLUMNS} FROM receivers ORDER BY name{BYTEWISE}"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn receiver(&self, id: ReceiverId) -> StoreResult<Option<ReceiverRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RECEIVER_COLUMNS} FROM receivers WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn insert_receiver(
        &self,
        r: &ReceiverSettings,
        now_ms: i64,
    ) -> StoreResult<ReceiverId> {
        let id: Option<ReceiverId> = sqlx::query_scalar(
            "INSERT INTO receivers (name, url, format, created_ms, group_by, group_wait_s,
                group_interval_s, auth_header, ca_pem)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
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

    pub async fn update_receiver(&self, id: ReceiverId, r: &ReceiverSettings) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE receivers SET name = $1, url = $2, format = $3, group_by = $4,
                group_wait_s = $5, group_interval_s = $6,
                auth_header = CASE WHEN $7 IS NULL THEN auth_header ELSE NULLIF($7, '') END,
                ca_pem = CASE WHEN $8 IS NULL THEN ca_pem ELSE NULLIF($8, '') END
             WHERE id = $9",
        )
        .bind(&r.name)
        .bind(&r.url)
        .bind(&r.format)
        .bind(&r.group_by)
        .bind(r.group_wait_s)
        .bind(r.group_interval_s)
        .bind(&r.auth_header)
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

    pub async fn delete_receiver(&self, id: ReceiverId) -> StoreResult<()> {
        self.delete_cascading("receivers", id.0, "there is no such receiver")
            .await
    }

    pub async fn pending_groups(&self) -> StoreResult<Vec<PendingGroup>> {
        // The receiver's columns and the group's last send have one value per (receiver,
        // group), but PostgreSQL takes only grouped columns (or those of a grouped primary
        // key): r.id and g.last_sent_ms are grouped by too. Groups created at the same
        // millisecond come by receiver and key.
        Ok(sqlx::query_as(&format!(
            "SELECT o.receiver_id, o.group_key, MIN(o.created_ms) AS first_created_ms,
                    MIN(o.next_attempt_ms) AS next_attempt_ms, g.last_sent_ms,
                    r.group_wait_s, r.group_interval_s
             FROM outbox o
             JOIN receivers r ON r.id = o.receiver_id
             LEFT JOIN receiver_groups g
                ON g.receiver_id = o.receiver_id AND g.group_key = o.group_key
             WHERE o.delivered_ms IS NULL AND o.failed_ms IS NULL AND r.enabled
             GROUP BY o.receiver_id, o.group_key, r.id, g.last_sent_ms
             ORDER BY first_created_ms, o.receiver_id, o.group_key{BYTEWISE}"
        ))
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn group_notifications(
        &self,
        receiver_id: ReceiverId,
        group_key: &str,
        now_ms: i64,
    ) -> StoreResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as(
            "SELECT id, receiver_id, group_key, alert_id, transition, payload, attempts
             FROM outbox
             WHERE receiver_id = $1 AND group_key = $2 AND delivered_ms IS NULL
               AND failed_ms IS NULL AND next_attempt_ms <= $3
             ORDER BY created_ms, id",
        )
        .bind(receiver_id)
        .bind(group_key)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn group_delivered(
        &self,
        receiver_id: ReceiverId,
        group_key: Option<&str>,
        ids: &[OutboxId],
        now_ms: i64,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(&format!(
            "UPDATE outbox SET delivered_ms = $1, attempts = attempts + 1 WHERE {}",
            in_id_list("id", 2)
        ))
        .bind(now_ms)
        .bind(id_list(ids.iter().map(|id| id.0)))
        .execute(&mut *tx)
        .await?;
        if let Some(group_key) = group_key {
            sqlx::query(
                "INSERT INTO receiver_groups (receiver_id, group_key, last_sent_ms)
                 VALUES ($1, $2, $3)
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

    pub async fn alerts_to_announce(&self, resolved_since_ms: i64) -> StoreResult<Vec<AlertRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
             WHERE a.state = 'firing'
                OR (a.state = 'resolved' AND a.resolved_ms >= $1 AND a.fired_ms IS NOT NULL)
             ORDER BY a.id"
        ))
        .bind(resolved_since_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn notification_failed(
        &self,
        id: OutboxId,
        error: &str,
        next_attempt_ms: Option<i64>,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE outbox SET attempts = attempts + 1, last_error = $1,
                next_attempt_ms = COALESCE($2, next_attempt_ms),
                failed_ms = CASE WHEN $2 IS NULL THEN $3 END
             WHERE id = $4",
        )
        .bind(error)
        .bind(next_attempt_ms)
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn outbox_counts(&self) -> StoreResult<OutboxCounts> {
        // COUNT is never NULL, so the COALESCEs SQLite's SUMs need are gone.
        Ok(sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE delivered_ms IS NULL AND failed_ms IS NULL) AS waiting,
                    COUNT(*) FILTER (WHERE delivered_ms IS NOT NULL) AS delivered,
                    COUNT(*) FILTER (WHERE failed_ms IS NOT NULL) AS failed
             FROM outbox",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
