//! Many guests' raw samples in PostgreSQL, for [`Store::histories_between`]: plain rows (a
//! PostgreSQL connection streams rows cheaply; SQLite packs them, see its `packed_samples`).

use super::dialect::Store;
use crate::db::error::StoreResult;
use crate::db::guests::{IntervalRow, interval_columns};
use crate::domain::GuestId;

impl Store {
    /// What SQLite's `samples_of_guests` reads, in plain rows.
    pub(super) async fn samples_of_guests(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let sql = format!(
            "SELECT {} FROM samples s
             WHERE guest_id = ANY($1) AND received_ms >= $2 AND received_ms < $3
             ORDER BY guest_id, received_ms, id",
            interval_columns("s")
        );
        Ok(sqlx::query_as(&sql)
            .bind(guest_ids)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?)
    }
}
