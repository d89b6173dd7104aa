//! The write probe: whether the database can be written now.

use super::dialect::Store;
use crate::db::error::StoreResult;

impl Store {
    pub async fn probe_write(&self, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO write_probe (id, at_ms) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE SET at_ms = excluded.at_ms",
        )
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
