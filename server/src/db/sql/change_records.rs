//! Changes made to guests, as recorded, and their measurements once settled.

use super::dialect::Store;
use crate::db::change_records::{ChangeRecordRow, NewChangeRecord, SettledFigures};
use crate::db::error::StoreResult;
use crate::domain::{ChangeRecordId, GuestId, TokenId};

const COLUMNS: &str = "c.id, c.guest_id, c.rule, c.kind, c.title, c.made_at_ms, c.recorded_ms,
    c.made_by, t.name AS token_name, c.note, c.projected_cpu_pct, c.settled_ms, c.cpu_before_pct,
    c.cpu_after_pct, c.wakeups_before, c.wakeups_after, c.idle_share_after, c.saved_cpu_pct";

impl Store {
    pub async fn record_change(&self, change: &NewChangeRecord<'_>) -> StoreResult<ChangeRecordId> {
        Ok(sqlx::query_scalar(
            "INSERT INTO change_records (guest_id, rule, kind, title, made_at_ms, recorded_ms,
                 made_by, token_id, note, projected_cpu_pct)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        )
        .bind(change.guest_id)
        .bind(change.rule)
        .bind(change.kind)
        .bind(change.title)
        .bind(change.made_at_ms)
        .bind(change.recorded_ms)
        .bind(change.made_by)
        .bind(change.token_id)
        .bind(change.note)
        .bind(change.projected_cpu_pct)
        .fetch_one(&self.pool)
        .await?)
    }

    pub async fn change_records(
        &self,
        guest_id: Option<GuestId>,
        limit: i64,
    ) -> StoreResult<Vec<ChangeRecordRow>> {
        let from = "FROM change_records c LEFT JOIN tokens t ON t.id = c.token_id";
        let newest_first = "ORDER BY c.made_at_ms DESC, c.id DESC";
        Ok(match guest_id {
            Some(guest_id) => {
                sqlx::query_as(&format!(
                    "SELECT {COLUMNS} {from} WHERE c.guest_id = $1 {newest_first} LIMIT $2"
                ))
                .bind(guest_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query_as(&format!("SELECT {COLUMNS} {from} {newest_first} LIMIT $1"))
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
        })
    }

    pub async fn change_record(&self, id: ChangeRecordId) -> StoreResult<Option<ChangeRecordRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM change_records c LEFT JOIN tokens t ON t.id = c.token_id
             WHERE c.id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn unsettled_change_records(
        &self,
        made_before_ms: i64,
        limit: i64,
    ) -> StoreResult<Vec<ChangeRecordRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM change_records c LEFT JOIN tokens t ON t.id = c.token_id
             WHERE c.settled_ms IS NULL AND c.made_at_ms < $1
             ORDER BY c.made_at_ms LIMIT $2"
        ))
        .bind(made_before_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn settle_change_record(
        &self,
        id: ChangeRecordId,
        figures: &SettledFigures,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE change_records SET settled_ms = $1, cpu_before_pct = $2, cpu_after_pct = $3,
                 wakeups_before = $4, wakeups_after = $5, idle_share_after = $6, saved_cpu_pct = $7
             WHERE id = $8",
        )
        .bind(figures.settled_ms)
        .bind(figures.cpu_before_pct)
        .bind(figures.cpu_after_pct)
        .bind(figures.wakeups_before)
        .bind(figures.wakeups_after)
        .bind(figures.idle_share_after)
        .bind(figures.saved_cpu_pct)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn agent_token_host(&self, token_id: TokenId) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT host_name FROM tokens WHERE id = $1 AND role = 'agent'")
                .bind(token_id)
                .fetch_optional(&self.pool)
                .await?
                .flatten(),
        )
    }
}
