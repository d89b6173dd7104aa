//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/history.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::IntervalRow;
use crate::db::history::StoredHistories;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS};
use crate::domain::GuestId;

use super::store::PgDb;

impl PgDb {
    pub async fn histories_between(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<StoredHistories> {
        let _ = (guest_ids, from_ms, to_ms, reach_ms);
        unimplemented!("scaffolding: history on PostgreSQL")
    }
}
