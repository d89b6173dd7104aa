//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/hosts.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;
use crate::db::hosts::HostRow;

use super::store::PgDb;

impl PgDb {
    pub async fn hosts(&self) -> StoreResult<Vec<HostRow>> {
        let _ = ();
        unimplemented!("scaffolding: hosts on PostgreSQL")
    }
}
