//! Dashboard users, in PostgreSQL: names compare as `lower(name COLLATE "C")` (ASCII letters
//! folded only), the expression of the unique index that stands for SQLite's `COLLATE NOCASE`, and the last-admin checks run under
//! the write lock, because under READ COMMITTED two demotions (or removals) of two different
//! admins would each count the other still there and leave none.

use super::store::{PgDb, WriteTx};
use crate::db::error::{StoreError, StoreResult};
use crate::db::users::UserRow;
use crate::domain::{UserId, UserRole};

impl PgDb {
    /// Adds a user; a name already taken is refused.
    pub async fn insert_user(
        &self,
        name: &str,
        role: UserRole,
        password_hash: &str,
        now_ms: i64,
    ) -> StoreResult<UserId> {
        // The conflict target names the index's expression: a name taken in another case is
        // taken.
        let inserted: Option<UserId> = sqlx::query_scalar(
            r#"INSERT INTO users (name, role, password_hash, created_ms) VALUES ($1, $2, $3, $4)
               ON CONFLICT ((lower(name COLLATE "C"))) DO NOTHING RETURNING id"#,
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
            r#"SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users
               WHERE lower(name COLLATE "C") = lower($1 COLLATE "C")"#,
        )
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

    /// Every user, by name.
    pub async fn users(&self) -> StoreResult<Vec<UserRow>> {
        // SQLite sorts the NOCASE column byte by byte once case is folded; "C" does the same
        // whatever the database's own collation.
        Ok(sqlx::query_as(
            r#"SELECT id, name, role, password_hash, created_ms, last_login_ms FROM users
               ORDER BY lower(name COLLATE "C") COLLATE "C""#,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Gives a user a new password hash (which ends their sessions).
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

    /// Changes a user's role; refused when it would leave no admin.
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

    /// Removes a user (whose sessions then lead nowhere); refused for the last admin.
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
