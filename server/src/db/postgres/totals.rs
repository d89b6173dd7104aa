//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/totals.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;
use crate::db::totals::ProcessTotalsRow;

use super::store::PgDb;

impl PgDb {
    pub async fn process_totals(&self, since_ms: i64) -> StoreResult<Vec<ProcessTotalsRow>> {
        let _ = (since_ms,);
        unimplemented!("scaffolding: totals on PostgreSQL")
    }
}
