//! Many guests' raw samples in PostgreSQL: plain rows (a PostgreSQL connection streams rows
//! cheaply; SQLite packs each guest's into one text, see its `samples_read`).

use super::dialect::{DB, Store, recent_rows_of_each_guest};
use super::guests::{ScopeBind, bind_scope};
use crate::db::error::StoreResult;
use crate::db::guests::{IntervalRow, interval_columns};
use crate::domain::GuestId;

/// The samples of each guest's window: `$1` is the window's length, the condition's parameters
/// start at `$2` (`scope_condition(scope, 2)`). Each guest's window is looked up in
/// `samples_guest_received`, guest by guest (see `recent_rows_of_each_guest`), never by a pass
/// over every sample ever stored.
pub(super) fn window_sql(condition: &str) -> String {
    format!(
        "SELECT {}
         FROM guests g {}
         WHERE {condition}
         ORDER BY g.id, s.received_ms, s.id",
        interval_columns("s"),
        recent_rows_of_each_guest("samples", "s")
    )
}

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

    /// What SQLite's `samples_in_window` reads, in plain rows.
    pub(super) async fn samples_in_window(
        &self,
        condition: &str,
        binds: Vec<ScopeBind>,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let sql = window_sql(condition);
        let query = sqlx::query_as::<DB, IntervalRow>(&sql).bind(window_ms);
        Ok(bind_scope(query, binds).fetch_all(&self.pool).await?)
    }
}
