//! Dashboard users. Names are compared ignoring ASCII case (`dialect::USER_NAME_*`). The
//! last-admin checks run in a write transaction: on PostgreSQL under READ COMMITTED, two
//! demotions (or removals) of two different admins would otherwise each count the other still
//! there and leave none.

use super::dialect::{Store, USER_NAME_CONFLICT, USER_NAME_IS_PARAM_1, USER_NAME_KEY, WriteTx};
use crate::db::error::{StoreError, StoreResult};
use crate::db::users::UserRow;
use crate::domain::{UserId, UserRole};

impl Store {
    pub async fn insert_user(
        &self,
        name: &str,
        role: UserRole,
        password_hash: &str,
        now_ms: i64,
    ) -> StoreResult<UserId> {
        // A name taken in another case is taken.
        let sql = format!(
            "INSERT INTO users (name, role, password_hash, created_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT {USER_NAME_CONFLICT} DO NOTHING RETURNING id"
        );
        let inserted: Option<UserId> = sqlx::query_scalar(&sql)
            .bind(name)
            .bind(role)
            .bind(password_hash)
            .bind(now_ms)
            .fetch_optional(&self.pool)
            .await?;
        inserted.ok_or_else(|| StoreError::Conflict(format!("there is already a user {name:?}")))
    }

    pub async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
        let sql = format!(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users
             WHERE {USER_NAME_IS_PARAM_1}"
        );
        Ok(sqlx::query_as(&sql)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn user_by_id(&self, id: UserId) -> StoreResult<Option<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users
             WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn record_login(&self, user_id: UserId, now_ms: i64) -> StoreResult<()> {
        sqlx::query("UPDATE users SET last_login_ms = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn users(&self) -> StoreResult<Vec<UserRow>> {
        // Byte by byte once case is folded, whatever the database's own collation.
        let sql = format!(
            "SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users
             ORDER BY {USER_NAME_KEY}"
        );
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    pub async fn set_password(&self, user_id: UserId, password_hash: &str) -> StoreResult<()> {
        let done = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(password_hash)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("there is no such user".into()));
        }
        Ok(())
    }

    pub async fn set_role(&self, user_id: UserId, role: UserRole) -> StoreResult<()> {
        // Under the write lock, the admins counted are those committed by every earlier write.
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE users SET role = $1 WHERE id = $2
               AND ($1 = 'admin' OR role <> 'admin'
                    OR (SELECT COUNT(*) FROM users WHERE role = 'admin') > 1)",
        )
        .bind(role)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return refusal(tx, user_id, "the last admin stays an admin").await;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn delete_user(&self, user_id: UserId) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM users WHERE id = $1
               AND (role <> 'admin' OR (SELECT COUNT(*) FROM users WHERE role = 'admin') > 1)",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return refusal(tx, user_id, "the last admin cannot be removed").await;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Why a guarded change of `user_id` changed nothing: no such user, or `reason`. Ends `tx`
/// (which wrote nothing).
async fn refusal(mut tx: WriteTx, user_id: UserId, reason: &str) -> StoreResult<()> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)")
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
    tx.rollback().await?;
    if exists {
        Err(StoreError::Conflict(reason.into()))
    } else {
        Err(StoreError::NotFound("there is no such user".into()))
    }
}
