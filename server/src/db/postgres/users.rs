//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/users.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::{StoreError, StoreResult};
use crate::db::users::UserRow;
use crate::domain::{UserId, UserRole};

use super::store::PgDb;

impl PgDb {
    pub async fn insert_user(
        &self,
        name: &str,
        role: UserRole,
        password_hash: &str,
        now_ms: i64,
    ) -> StoreResult<UserId> {
        let _ = (name, role, password_hash, now_ms);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
        let _ = (name,);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn user_by_id(&self, id: UserId) -> StoreResult<Option<UserRow>> {
        let _ = (id,);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn record_login(&self, user_id: UserId, now_ms: i64) -> StoreResult<()> {
        let _ = (user_id, now_ms);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn users(&self) -> StoreResult<Vec<UserRow>> {
        let _ = ();
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn set_password(&self, user_id: UserId, password_hash: &str) -> StoreResult<()> {
        let _ = (user_id, password_hash);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn set_role(&self, user_id: UserId, role: UserRole) -> StoreResult<()> {
        let _ = (user_id, role);
        unimplemented!("scaffolding: users on PostgreSQL")
    }

    pub async fn delete_user(&self, user_id: UserId) -> StoreResult<()> {
        let _ = (user_id,);
        unimplemented!("scaffolding: users on PostgreSQL")
    }
}
