//! Dashboard users, in SQLite.

use super::store::SqliteDb;
use crate::db::error::{StoreError, StoreResult};
use crate::db::users::UserRow;
use crate::domain::{UserId, UserRole};

impl SqliteDb {
    /// Adds a user; a name already taken is refused.
    pub async fn insert_user(
        &self,
        name: &str,
        role: UserRole,
        password_hash: &str,
        now_ms: i64,
    ) -> StoreResult<UserId> {
        let inserted: Option<UserId> = sqlx::query_scalar(
            "INSERT INTO users (name, role, password_hash, created_ms) VALUES (?, ?, ?, ?)
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(name)
        .bind(role)
        .bind(password_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        inserted.ok_or_else(|| StoreError::Conflict(format!("there is already a user {name:?}")))
    }

    pub async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users WHERE name = ?",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn user_by_id(&self, id: UserId) -> StoreResult<Option<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn record_login(&self, user_id: UserId, now_ms: i64) -> StoreResult<()> {
        sqlx::query("UPDATE users SET last_login_ms = ? WHERE id = ?")
            .bind(now_ms)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every user, by name.
    pub async fn users(&self) -> StoreResult<Vec<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Gives a user a new password hash (which ends their sessions).
    pub async fn set_password(&self, user_id: UserId, password_hash: &str) -> StoreResult<()> {
        let done = sqlx::query("UPDATE users SET password_hash = ? WHERE id = ?")
            .bind(password_hash)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("there is no such user".into()));
        }
        Ok(())
    }

    /// Changes a user's role; refused when it would leave no admin.
    pub async fn set_role(&self, user_id: UserId, role: UserRole) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE users SET role = ?1 WHERE id = ?2
               AND (?1 = 'admin' OR role <> 'admin'
                    OR (SELECT COUNT(*) FROM users WHERE role = 'admin') > 1)",
        )
        .bind(role)
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return self.refusal(user_id, "the last admin stays an admin").await;
        }
        Ok(())
    }

    /// Removes a user (whose sessions then lead nowhere); refused for the last admin.
    pub async fn delete_user(&self, user_id: UserId) -> StoreResult<()> {
        let done = sqlx::query(
            "DELETE FROM users WHERE id = ?
               AND (role <> 'admin' OR (SELECT COUNT(*) FROM users WHERE role = 'admin') > 1)",
        )
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return self
                .refusal(user_id, "the last admin cannot be removed")
                .await;
        }
        Ok(())
    }

    /// Why a guarded change of `user_id` changed nothing: no such user, or `reason`.
    async fn refusal(&self, user_id: UserId, reason: &str) -> StoreResult<()> {
        match self.user_by_id(user_id).await? {
            None => Err(StoreError::NotFound("there is no such user".into())),
            Some(_) => Err(StoreError::Conflict(reason.into())),
        }
    }
}
