use sqlx::{FromRow, SqliteConnection};

use super::Db;
use crate::error::AppResult;
use crate::facts::ValidFacts;

/// The newest facts of one guest from one source.
#[derive(Debug, Clone, FromRow)]
pub struct FactsRow {
    pub guest_id: i64,
    pub source: String,
    pub received_ms: i64,
    pub facts_json: String,
}

/// One distinct set of facts a guest reported: a kernel or command-line event.
#[derive(Debug, Clone, FromRow)]
pub struct FactsEventRow {
    pub source: String,
    pub first_received_ms: i64,
    pub received_ms: i64,
    pub kernel_release: Option<String>,
    pub cmdline: Option<String>,
}

/// Refreshes the guest's newest row from this source when its facts did not change, or adds a
/// row when they did.
pub(super) async fn record_facts(
    conn: &mut SqliteConnection,
    guest_id: i64,
    facts: &ValidFacts,
    now_ms: i64,
) -> AppResult<()> {
    let latest: Option<(i64, String)> = sqlx::query_as(
        "SELECT id, stable_json FROM guest_facts WHERE guest_id = ? AND source = ?
         ORDER BY id DESC LIMIT 1",
    )
    .bind(guest_id)
    .bind(facts.source)
    .fetch_optional(&mut *conn)
    .await?;
    match latest {
        Some((id, stable)) if stable == facts.stable_json => {
            sqlx::query("UPDATE guest_facts SET received_ms = ?, facts_json = ? WHERE id = ?")
                .bind(now_ms)
                .bind(&facts.facts_json)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        _ => {
            sqlx::query(
                "INSERT INTO guest_facts (guest_id, source, first_received_ms, received_ms, kernel_release, cmdline, stable_json, facts_json)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(guest_id)
            .bind(facts.source)
            .bind(now_ms)
            .bind(now_ms)
            .bind(&facts.facts.kernel_release)
            .bind(&facts.facts.cmdline)
            .bind(&facts.stable_json)
            .bind(&facts.facts_json)
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

impl Db {
    /// Stores facts a guest probe posted itself.
    pub async fn record_guest_facts(
        &self,
        guest_id: i64,
        facts: &ValidFacts,
        now_ms: i64,
    ) -> AppResult<()> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        record_facts(&mut tx, guest_id, facts, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The most recently seen guest with one of these UUIDs.
    pub async fn guest_by_uuid(&self, uuids: &[String]) -> AppResult<Option<i64>> {
        let mut best: Option<(i64, i64)> = None;
        for uuid in uuids {
            let found: Option<(i64, i64)> = sqlx::query_as(
                "SELECT id, last_seen_ms FROM guests WHERE uuid = ? ORDER BY last_seen_ms DESC LIMIT 1",
            )
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(f) = found
                && best.is_none_or(|b| f.1 > b.1)
            {
                best = Some(f);
            }
        }
        Ok(best.map(|(id, _)| id))
    }

    /// The newest facts of every guest from every source.
    pub async fn latest_facts(&self) -> AppResult<Vec<FactsRow>> {
        Ok(sqlx::query_as(
            "SELECT guest_id, source, received_ms, facts_json FROM guest_facts
             WHERE id IN (SELECT MAX(id) FROM guest_facts GROUP BY guest_id, source)",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// A guest's kernel events, oldest first.
    pub async fn facts_history(&self, guest_id: i64) -> AppResult<Vec<FactsEventRow>> {
        Ok(sqlx::query_as(
            "SELECT source, first_received_ms, received_ms, kernel_release, cmdline
             FROM guest_facts WHERE guest_id = ? ORDER BY id",
        )
        .bind(guest_id)
        .fetch_all(&self.pool)
        .await?)
    }
}
