//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/guests.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;
use crate::db::guests::{GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow};
use crate::domain::{GuestId, HostId};

use super::store::PgDb;

impl PgDb {
    pub async fn guests_in(&self, scope: GuestScope) -> StoreResult<Vec<GuestRow>> {
        let _ = (scope,);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }

    pub async fn window_intervals(
        &self,
        scope: GuestScope,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let _ = (scope, window_ms);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }

    pub async fn window_idle_readings(
        &self,
        scope: GuestScope,
        window_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<Vec<IdleReading>> {
        let _ = (scope, window_ms, reach_ms);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }

    pub async fn guest_host_id(&self, guest_id: GuestId) -> StoreResult<Option<HostId>> {
        let _ = (guest_id,);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }

    pub async fn recent_samples(
        &self,
        guest_id: GuestId,
        limit: i64,
    ) -> StoreResult<Vec<SampleRow>> {
        let _ = (guest_id, limit);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }

    pub async fn samples_between(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<(Vec<IntervalRow>, Vec<IdleReading>)> {
        let _ = (guest_id, from_ms, to_ms, reach_ms);
        unimplemented!("scaffolding: guests on PostgreSQL")
    }
}
