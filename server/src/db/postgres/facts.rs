//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/facts.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::{StoreError, StoreResult};
use crate::db::facts::{FactsEventRow, FactsRow, FactsSpanRow, StoredFacts};
use crate::db::facts::{IDLE_READING_MIN_GAP_MS, IDLE_READINGS_KEPT_MS, MAX_EVENTS_PER_SOURCE};
use crate::db::guests::IdleReading;
use crate::domain::{GuestId, HostId, TokenId};
use crate::ingest::facts::ValidFacts;

use super::store::PgDb;

impl PgDb {
    pub async fn record_guest_facts(
        &self,
        token_id: TokenId,
        uuid: &str,
        guest_id: GuestId,
        facts: &ValidFacts,
        now_ms: i64,
    ) -> StoreResult<StoredFacts> {
        let _ = (token_id, uuid, guest_id, facts, now_ms);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn guest_by_uuid(&self, uuids: &[String]) -> StoreResult<Option<GuestId>> {
        let _ = (uuids,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn latest_facts(&self, host_id: Option<HostId>) -> StoreResult<Vec<FactsRow>> {
        let _ = (host_id,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn facts_spans(&self, guest_id: GuestId) -> StoreResult<Vec<FactsSpanRow>> {
        let _ = (guest_id,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn facts_history(&self, guest_id: GuestId) -> StoreResult<Vec<FactsEventRow>> {
        let _ = (guest_id,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn fact_changes(
        &self,
        guest_id: Option<GuestId>,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        let _ = (guest_id,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }

    pub async fn fact_changes_of_host(
        &self,
        host_id: HostId,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        let _ = (host_id,);
        unimplemented!("scaffolding: facts on PostgreSQL")
    }
}
