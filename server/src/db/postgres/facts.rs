//! Guest facts and idle readings, in PostgreSQL. As in SQLite, except: a guest is looked up by
//! all its UUID forms in one query (a bound array) rather than one query each, since every
//! query is a network round trip here; `JOIN` replaces the `CROSS JOIN` that fixes SQLite's
//! join order (PostgreSQL's planner orders joins itself, and takes no `ON` after `CROSS JOIN`);
//! and the reads without an `ORDER BY` on SQLite get the order SQLite's plan gives them (by id),
//! since PostgreSQL's hash plans give none.

use sqlx::PgConnection;

use super::store::PgDb;
use crate::db::error::{StoreError, StoreResult};
use crate::db::facts::{FactsEventRow, FactsRow, FactsSpanRow, StoredFacts};
use crate::db::facts::{IDLE_READING_MIN_GAP_MS, IDLE_READINGS_KEPT_MS, MAX_EVENTS_PER_SOURCE};
use crate::db::guests::IdleReading;
use crate::domain::{GuestId, HostId, TokenId};
use crate::ingest::facts::ValidFacts;

async fn record_idle_reading(
    conn: &mut PgConnection,
    guest_id: GuestId,
    facts: &ValidFacts,
    idle_fraction: f64,
    now_ms: i64,
) -> StoreResult<Option<IdleReading>> {
    let recent: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM guest_idle_readings
                        WHERE guest_id = $1 AND received_ms > $2 AND source = $3)",
    )
    .bind(guest_id)
    .bind(now_ms - IDLE_READING_MIN_GAP_MS)
    .bind(facts.source)
    .fetch_one(&mut *conn)
    .await?;
    if recent {
        return Ok(None);
    }
    let measured_ms = facts
        .facts
        .idle_measured_s
        .map(|s| (s * 1000.0).round() as i64);
    sqlx::query(
        "INSERT INTO guest_idle_readings (guest_id, source, received_ms, measured_ms, idle_fraction)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(guest_id)
    .bind(facts.source)
    .bind(now_ms)
    .bind(measured_ms)
    .bind(idle_fraction)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM guest_idle_readings WHERE guest_id = $1 AND received_ms < $2")
        .bind(guest_id)
        .bind(now_ms - IDLE_READINGS_KEPT_MS)
        .execute(&mut *conn)
        .await?;
    Ok(Some(IdleReading {
        guest_id,
        source: facts.source.to_string(),
        received_ms: now_ms,
        measured_ms,
        idle_fraction,
    }))
}

/// Refreshes the guest's newest row from this source when its facts did not change, or adds a
/// row when they did (dropping the oldest beyond `MAX_EVENTS_PER_SOURCE`). `conn` is a write
/// transaction's (ingest's, or [`PgDb::record_guest_facts`]'s).
pub(super) async fn record_facts(
    conn: &mut PgConnection,
    guest_id: GuestId,
    facts: &ValidFacts,
    now_ms: i64,
) -> StoreResult<StoredFacts> {
    let reading = match facts
        .facts
        .idle_fraction
        .filter(|f| (0.0..=1.0).contains(f))
    {
        Some(idle) => record_idle_reading(conn, guest_id, facts, idle, now_ms).await?,
        None => None,
    };
    let latest: Option<(i64, String)> = sqlx::query_as(
        "SELECT id, stable_json FROM guest_facts WHERE guest_id = $1 AND source = $2
         ORDER BY id DESC LIMIT 1",
    )
    .bind(guest_id)
    .bind(facts.source)
    .fetch_optional(&mut *conn)
    .await?;
    let changed = match latest {
        Some((id, stable)) if stable == facts.stable_json => {
            sqlx::query("UPDATE guest_facts SET received_ms = $1, facts_json = $2 WHERE id = $3")
                .bind(now_ms)
                .bind(&facts.facts_json)
                .bind(id)
                .execute(&mut *conn)
                .await?;
            false
        }
        _ => {
            sqlx::query(
                "INSERT INTO guest_facts (guest_id, source, first_received_ms, received_ms, kernel_release, cmdline, stable_json, facts_json)
                 VALUES ($1, $2, $3, $3, $4, $5, $6, $7)",
            )
            .bind(guest_id)
            .bind(facts.source)
            .bind(now_ms)
            .bind(&facts.facts.kernel_release)
            .bind(&facts.facts.cmdline)
            .bind(&facts.stable_json)
            .bind(&facts.facts_json)
            .execute(&mut *conn)
            .await?;
            sqlx::query(
                "DELETE FROM guest_facts WHERE guest_id = $1 AND source = $2 AND id NOT IN
                 (SELECT id FROM guest_facts WHERE guest_id = $1 AND source = $2
                  ORDER BY id DESC LIMIT $3)",
            )
            .bind(guest_id)
            .bind(facts.source)
            .bind(MAX_EVENTS_PER_SOURCE)
            .execute(&mut *conn)
            .await?;
            // The first facts of a source are not a change; later distinct ones are.
            latest.is_some()
        }
    };
    Ok(StoredFacts {
        source: facts.source.to_string(),
        received_ms: now_ms,
        facts_json: facts.facts_json.clone(),
        reading,
        changed,
    })
}

impl PgDb {
    /// Stores facts a guest probe posted itself with a guest token. The token is bound to the
    /// first guest UUID it reports for, and refused for any other, so one guest cannot write
    /// facts for its neighbours; and a UUID another token in use is bound to is refused to a new
    /// token, so a new token cannot take over a guest. `uuid` is the form the guest sent.
    pub async fn record_guest_facts(
        &self,
        token_id: TokenId,
        uuid: &str,
        guest_id: GuestId,
        facts: &ValidFacts,
        now_ms: i64,
    ) -> StoreResult<StoredFacts> {
        // The write lock: the token's binding is read, then written, and two probes posting
        // with new tokens for one guest at once must not both take it.
        let mut tx = self.begin_write().await?;
        let bound: Option<String> =
            sqlx::query_scalar("SELECT guest_uuid FROM tokens WHERE id = $1")
                .bind(token_id)
                .fetch_one(&mut *tx)
                .await?;
        match bound {
            Some(bound) if bound != uuid => {
                tx.rollback().await?;
                return Err(StoreError::Refused(format!(
                    "this guest token submits facts for the guest with UUID {bound}, not {uuid}; give each guest its own token"
                )));
            }
            Some(_) => {}
            // A new token takes the UUID it first reports for, unless a token in use has it
            // (in either byte order): a revoked one no longer holds its guest, so that a guest
            // whose token was revoked can be given a new one.
            None => {
                let [as_sent, swapped] = crate::ingest::facts::uuid_forms(uuid);
                let taken: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM tokens
                        WHERE role = 'guest' AND guest_uuid IN ($1, $2) AND id <> $3
                          AND revoked_ms IS NULL)",
                )
                .bind(as_sent)
                .bind(swapped)
                .bind(token_id)
                .fetch_one(&mut *tx)
                .await?;
                if taken {
                    tx.rollback().await?;
                    return Err(StoreError::Refused(format!(
                        "the guest with UUID {uuid} submits its facts with another guest token; revoke that one to give the guest a new token"
                    )));
                }
            }
        }
        sqlx::query("UPDATE tokens SET guest_uuid = $1, last_used_ms = $2 WHERE id = $3")
            .bind(uuid)
            .bind(now_ms)
            .bind(token_id)
            .execute(&mut *tx)
            .await?;
        let stored = record_facts(&mut tx, guest_id, facts, now_ms).await?;
        let host_id: HostId = sqlx::query_scalar("SELECT host_id FROM guests WHERE id = $1")
            .bind(guest_id)
            .fetch_one(&mut *tx)
            .await?;
        self.announce_hosts(&mut tx, vec![host_id]).await?;
        tx.commit().await?;
        Ok(stored)
    }

    /// The most recently seen guest with one of these UUIDs. One query for all the forms; on
    /// equal `last_seen_ms` the earlier form in `uuids` wins, as in SQLite's loop (which keeps
    /// the first of equals).
    pub async fn guest_by_uuid(&self, uuids: &[String]) -> StoreResult<Option<GuestId>> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM guests WHERE uuid = ANY($1)
             ORDER BY last_seen_ms DESC, array_position($1, uuid) LIMIT 1",
        )
        .bind(uuids)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The newest facts from every source of every guest, or of one host's guests. By id, the
    /// order SQLite's plan gives.
    pub async fn latest_facts(&self, host_id: Option<HostId>) -> StoreResult<Vec<FactsRow>> {
        Ok(sqlx::query_as(
            "SELECT f.guest_id, f.source, f.received_ms, f.facts_json,
                    (SELECT g.vm_process_since_ms FROM guests g WHERE g.id = f.guest_id)
                        AS process_since_ms
             FROM guest_facts f
             WHERE f.id IN (SELECT MAX(id) FROM guest_facts GROUP BY guest_id, source)
               AND ($1::BIGINT IS NULL OR f.guest_id IN (SELECT id FROM guests WHERE host_id = $1))
             ORDER BY f.id",
        )
        .bind(host_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every set of facts a guest reported, from when it was first to when it was last received
    /// (server clock), with the newest full facts of the set; oldest first.
    pub async fn facts_spans(&self, guest_id: GuestId) -> StoreResult<Vec<FactsSpanRow>> {
        Ok(sqlx::query_as(
            "SELECT source, first_received_ms, received_ms, facts_json
             FROM guest_facts WHERE guest_id = $1 ORDER BY id",
        )
        .bind(guest_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A guest's kernel events, newest first.
    pub async fn facts_history(&self, guest_id: GuestId) -> StoreResult<Vec<FactsEventRow>> {
        Ok(sqlx::query_as(
            "SELECT source, first_received_ms, received_ms, kernel_release, cmdline
             FROM guest_facts WHERE guest_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(guest_id)
        .bind(MAX_EVENTS_PER_SOURCE)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every kernel or command-line change of each guest (or of `guest_id`): a facts row that
    /// has an older one from the same source (the first facts a guest reports are not a change).
    /// As (guest id, source, first received, server clock ms), oldest first (equal times by id,
    /// so that the order does not depend on the plan).
    pub async fn fact_changes(
        &self,
        guest_id: Option<GuestId>,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT f.guest_id, f.source, f.first_received_ms FROM guest_facts f
             WHERE ($1::BIGINT IS NULL OR f.guest_id = $1)
               AND EXISTS (SELECT 1 FROM guest_facts e
                           WHERE e.guest_id = f.guest_id AND e.source = f.source AND e.id < f.id)
             ORDER BY f.guest_id, f.first_received_ms, f.id",
        )
        .bind(guest_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// [`PgDb::fact_changes`] of one host's guests.
    pub async fn fact_changes_of_host(
        &self,
        host_id: HostId,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT f.guest_id, f.source, f.first_received_ms
             FROM guests g JOIN guest_facts f ON f.guest_id = g.id
             WHERE g.host_id = $1
               AND EXISTS (SELECT 1 FROM guest_facts e
                           WHERE e.guest_id = f.guest_id AND e.source = f.source AND e.id < f.id)
             ORDER BY f.guest_id, f.first_received_ms, f.id",
        )
        .bind(host_id)
        .fetch_all(&self.pool)
        .await?)
    }
}
