//! Settings an admin saves.

use super::dialect::Store;
use crate::db::cluster::ClusterChange;
use crate::db::error::StoreResult;

impl Store {
    pub async fn setting(&self, name: &str) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
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
        // A transaction so that the other servers hear of the setting exactly when it is
        // committed.
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO settings (name, value, updated_ms, updated_by) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value,
                updated_ms = excluded.updated_ms, updated_by = excluded.updated_by",
        )
        .bind(name)
        .bind(value)
        .bind(now_ms)
        .bind(by)
        .execute(&mut *tx)
        .await?;
        self.announce(&mut *tx, ClusterChange::Setting(name.to_string()))
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
