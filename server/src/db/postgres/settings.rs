//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/settings.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;

use super::store::PgDb;

impl PgDb {
    pub async fn setting(&self, name: &str) -> StoreResult<Option<String>> {
        let _ = (name,);
        unimplemented!("scaffolding: settings on PostgreSQL")
    }

    pub async fn save_setting(
        &self,
        name: &str,
        value: &str,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<()> {
        let _ = (name, value, by, now_ms);
        unimplemented!("scaffolding: settings on PostgreSQL")
    }
}
