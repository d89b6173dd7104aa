//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/alerts.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::alerts::{
    AlertRow, AlertWrite, NewReceiver, NewRule, OutboxCounts, OutboxRow, PendingGroup, ReceiverRow,
    RuleRow, SilenceRow,
};
use crate::db::error::{StoreError, StoreResult};
use crate::domain::{AlertId, OutboxId, ReceiverId, RuleId, SilenceId};

use super::store::PgDb;

impl PgDb {
    pub async fn alert_rules(&self) -> StoreResult<Vec<RuleRow>> {
        let _ = ();
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn save_alert_rule(
        &self,
        id: Option<RuleId>,
        rule: &NewRule,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<RuleId> {
        let _ = (id, rule, by, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn delete_alert_rule(&self, id: RuleId) -> StoreResult<()> {
        let _ = (id,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn open_alerts(&self) -> StoreResult<Vec<AlertRow>> {
        let _ = ();
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn resolved_alerts(&self, limit: i64) -> StoreResult<Vec<AlertRow>> {
        let _ = (limit,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn alerts_of(&self, subject: &str, subject_id: i64) -> StoreResult<Vec<AlertRow>> {
        let _ = (subject, subject_id);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn write_alerts(&self, writes: Vec<AlertWrite>, now_ms: i64) -> StoreResult<()> {
        let _ = (writes, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn acknowledge_alert(&self, id: AlertId, by: &str, now_ms: i64) -> StoreResult<bool> {
        let _ = (id, by, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn silences(&self, now_ms: i64) -> StoreResult<Vec<SilenceRow>> {
        let _ = (now_ms,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

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
        let _ = (rule_id, pattern, starts_ms, ends_ms, reason, by, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn expire_silence(&self, id: SilenceId, now_ms: i64) -> StoreResult<bool> {
        let _ = (id, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn receivers(&self) -> StoreResult<Vec<ReceiverRow>> {
        let _ = ();
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn receiver(&self, id: ReceiverId) -> StoreResult<Option<ReceiverRow>> {
        let _ = (id,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn insert_receiver(&self, r: &NewReceiver, now_ms: i64) -> StoreResult<ReceiverId> {
        let _ = (r, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn update_receiver(&self, id: ReceiverId, r: &NewReceiver) -> StoreResult<()> {
        let _ = (id, r);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn delete_receiver(&self, id: ReceiverId) -> StoreResult<()> {
        let _ = (id,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn pending_groups(&self) -> StoreResult<Vec<PendingGroup>> {
        let _ = ();
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn group_notifications(
        &self,
        receiver_id: ReceiverId,
        group_key: &str,
        now_ms: i64,
    ) -> StoreResult<Vec<OutboxRow>> {
        let _ = (receiver_id, group_key, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn group_delivered(
        &self,
        receiver_id: ReceiverId,
        group_key: Option<&str>,
        ids: &[OutboxId],
        now_ms: i64,
    ) -> StoreResult<()> {
        let _ = (receiver_id, group_key, ids, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn alerts_to_announce(&self, resolved_since_ms: i64) -> StoreResult<Vec<AlertRow>> {
        let _ = (resolved_since_ms,);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn notification_failed(
        &self,
        id: OutboxId,
        error: &str,
        next_attempt_ms: Option<i64>,
        now_ms: i64,
    ) -> StoreResult<()> {
        let _ = (id, error, next_attempt_ms, now_ms);
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }

    pub async fn outbox_counts(&self) -> StoreResult<OutboxCounts> {
        let _ = ();
        unimplemented!("scaffolding: alerts on PostgreSQL")
    }
}
