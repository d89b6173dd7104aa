//! Settings an admin saves, in SQLite.

use super::store::SqliteDb;
use crate::db::error::StoreResult;

impl SqliteDb {
    /// A setting's stored value, if an admin ever saved it.
    pub async fn setting(&self, name: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM settings WHERE name = ?")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn save_setting(
        &self,
        name: &str,
        value: &str,
        by: &str,
        now_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO settings (name, value, updated_ms, updated_by) VALUES (?, ?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value,
                updated_ms = excluded.updated_ms, updated_by = excluded.updated_by",
        )
        .bind(name)
        .bind(value)
        .bind(now_ms)
        .bind(by)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
