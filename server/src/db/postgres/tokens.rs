//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/tokens.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::StoreResult;
use crate::db::tokens::{TokenListRow, TokenRow};
use crate::domain::{TokenId, TokenRole};

use super::store::PgDb;

impl PgDb {
    pub async fn insert_token(
        &self,
        name: &str,
        role: TokenRole,
        sha256_hex: &str,
        host_name: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<TokenId> {
        let _ = (name, role, sha256_hex, host_name, now_ms);
        unimplemented!("scaffolding: tokens on PostgreSQL")
    }

    pub async fn tokens_by_hash_prefix(&self, prefix: &str) -> StoreResult<Vec<TokenRow>> {
        let _ = (prefix,);
        unimplemented!("scaffolding: tokens on PostgreSQL")
    }

    pub async fn tokens(&self) -> StoreResult<Vec<TokenListRow>> {
        let _ = ();
        unimplemented!("scaffolding: tokens on PostgreSQL")
    }

    pub async fn revoke_token(&self, id: TokenId, now_ms: i64) -> StoreResult<bool> {
        let _ = (id, now_ms);
        unimplemented!("scaffolding: tokens on PostgreSQL")
    }
}
