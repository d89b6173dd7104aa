//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/test_support.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;
use crate::db::guests::GuestScope;
use crate::db::reports::RawSample;
use crate::db::rollups::StoredCounts;
use crate::domain::{GuestId, ReportId};
use std::collections::HashMap;

use super::store::PgDb;

impl PgDb {
    pub async fn checkpoint(&self) -> StoreResult<()> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn vacuum(&self) -> StoreResult<()> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn report_sequence(&self, run_id: &str) -> StoreResult<Vec<i64>> {
        let _ = (run_id,);
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn insert_raw_samples(&self, rows: &[RawSample]) -> StoreResult<()> {
        let _ = (rows,);
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn guest_ids_by_name(&self) -> StoreResult<HashMap<(String, String), GuestId>> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn any_report_id(&self) -> StoreResult<ReportId> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn window_query_plan(&self, scope: GuestScope) -> StoreResult<Vec<String>> {
        let _ = (scope,);
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn rollup_query_plans(&self) -> StoreResult<Vec<String>> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }

    pub async fn stored_counts(&self) -> StoreResult<StoredCounts> {
        let _ = ();
        unimplemented!("scaffolding: test_support on PostgreSQL")
    }
}
