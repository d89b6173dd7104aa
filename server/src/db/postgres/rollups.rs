//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/rollups.rs.
#![allow(unused_imports, unreachable_code)]

use crate::analysis::history::Summary;
use crate::db::error::{StoreError, StoreResult};
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow};
use crate::domain::{GuestId, ReportId};

use super::store::PgDb;

impl PgDb {
    pub async fn guests_with_samples_before(&self, before_ms: i64) -> StoreResult<Vec<GuestId>> {
        let _ = (before_ms,);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }

    pub async fn roll_up_guest(
        &self,
        guest_id: GuestId,
        windows: &[(i64, Summary)],
        before_ms: i64,
        keep: Option<(i64, i64)>,
    ) -> StoreResult<u64> {
        let _ = (guest_id, windows, before_ms, keep);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }

    pub async fn merge_hourly_rollups(&self, before_ms: i64) -> StoreResult<u64> {
        let _ = (before_ms,);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }

    pub async fn reports_of_samples(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<ReportId>> {
        let _ = (guest_id, from_ms, to_ms);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }

    pub async fn expire(
        &self,
        rollups_before_ms: i64,
        reports_before_ms: i64,
        keep_reports: &[ReportId],
    ) -> StoreResult<u64> {
        let _ = (rollups_before_ms, reports_before_ms, keep_reports);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }

    pub async fn rollups_between(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<RollupRow>> {
        let _ = (guest_id, from_ms, to_ms);
        unimplemented!("scaffolding: rollups on PostgreSQL")
    }
}
