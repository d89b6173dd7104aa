//! Guest facts and idle readings. Reads that need no order of their own come by id, so that
//! the order does not depend on the plan (PostgreSQL's hash plans give none).

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{Conn, DB, JOIN_IN_ORDER, Store, id_list, in_id_list};
use crate::db::error::{StoreError, StoreResult};
use crate::db::facts::{DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow, StoredFacts};
use crate::db::facts::{IDLE_READING_MIN_GAP_MS, IDLE_READINGS_KEPT_MS, MAX_EVENTS_PER_SOURCE};
use crate::db::guests::IdleReading;
use crate::db::reports::ROWS_PER_STATEMENT;
use crate::domain::{GuestId, HostId, TokenId};
use crate::ingest::binding::{Candidate, Delivery, Refusal, TokenBinding};
use crate::ingest::facts::ValidFacts;

/// What a guest sent about itself, to store: for which guest, and when it arrived.
pub(super) struct FactsToStore<'a> {
    pub guest_id: GuestId,
    pub facts: &'a ValidFacts,
    pub received_ms: i64,
}

/// The idle reading each of `items` keeps, in their order: none when it sent none, or one less
/// than [`IDLE_READING_MIN_GAP_MS`] after the last of its source. Readings older than
/// [`IDLE_READINGS_KEPT_MS`] (before the earliest item arrived) of a guest given a new one go.
async fn record_idle_readings(
    conn: &mut Conn,
    items: &[FactsToStore<'_>],
) -> StoreResult<Vec<Option<IdleReading>>> {
    let offered: Vec<Option<f64>> = items
        .iter()
        .map(|FactsToStore { facts, .. }| {
            facts
                .facts
                .idle_fraction
                .filter(|f| (0.0..=1.0).contains(f))
        })
        .collect();
    let offering = || {
        items
            .iter()
            .zip(&offered)
            .filter(|(_, idle)| idle.is_some())
            .map(|(item, _)| item.guest_id.0)
    };
    if offering().next().is_none() {
        return Ok(vec![None; items.len()]);
    }
    let earliest_ms = items
        .iter()
        .map(|i| i.received_ms)
        .min()
        .unwrap_or_default();
    // Each guest's and source's last reading, if within the gap of the earliest item.
    let sql = format!(
        "SELECT guest_id, source, MAX(received_ms) FROM guest_idle_readings
         WHERE {} AND received_ms > $2 GROUP BY guest_id, source",
        in_id_list("guest_id", 1)
    );
    let last: HashMap<(GuestId, String), i64> = sqlx::query_as(&sql)
        .bind(id_list(offering()))
        .bind(earliest_ms - IDLE_READING_MIN_GAP_MS)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|(guest, source, at_ms): (GuestId, String, i64)| ((guest, source), at_ms))
        .collect();
    let readings: Vec<Option<IdleReading>> = items
        .iter()
        .zip(&offered)
        .map(|(item, idle)| {
            let idle_fraction = (*idle)?;
            let FactsToStore {
                guest_id,
                facts,
                received_ms,
            } = *item;
            let key = (guest_id, facts.source.to_string());
            if last
                .get(&key)
                .is_some_and(|at_ms| *at_ms > received_ms - IDLE_READING_MIN_GAP_MS)
            {
                return None;
            }
            Some(IdleReading {
                guest_id,
                source: key.1,
                received_ms,
                measured_ms: facts
                    .facts
                    .idle_measured_s
                    .map(|s| (s * 1000.0).round() as i64),
                idle_fraction,
            })
        })
        .collect();
    let new: Vec<&IdleReading> = readings.iter().flatten().collect();
    for chunk in new.chunks(ROWS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO guest_idle_readings (guest_id, source, received_ms, measured_ms,
                idle_fraction) ",
        );
        insert.push_values(chunk, |mut row, reading| {
            row.push_bind(reading.guest_id)
                .push_bind(&reading.source)
                .push_bind(reading.received_ms)
                .push_bind(reading.measured_ms)
                .push_bind(reading.idle_fraction);
        });
        insert.build().execute(&mut *conn).await?;
    }
    if !new.is_empty() {
        let sql = format!(
            "DELETE FROM guest_idle_readings WHERE {} AND received_ms < $2",
            in_id_list("guest_id", 1)
        );
        sqlx::query(&sql)
            .bind(id_list(new.iter().map(|r| r.guest_id.0)))
            .bind(earliest_ms - IDLE_READINGS_KEPT_MS)
            .execute(&mut *conn)
            .await?;
    }
    Ok(readings)
}

/// Stores what each of `items` sent (each guest at most once), in a few statements for all of
/// them: a guest's newest row from the same source is refreshed when its
/// facts did not change, and a row is added when they did (dropping the oldest beyond
/// `MAX_EVENTS_PER_SOURCE`). Says what was stored, in the items' order. `conn` is a write
/// transaction's (ingest's, or [`Store::record_guest_facts`]'s).
pub(super) async fn record_facts(
    conn: &mut Conn,
    items: &[FactsToStore<'_>],
) -> StoreResult<Vec<StoredFacts>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let readings = record_idle_readings(conn, items).await?;
    let ids = || items.iter().map(|item| item.guest_id.0);
    // The newest row of each guest and source: the index (guest_id, source, id) gives it.
    let sql = format!(
        "SELECT f.guest_id, f.source, f.id, f.stable_json FROM guest_facts f
         WHERE f.id IN (SELECT MAX(l.id) FROM guest_facts l WHERE {}
                        GROUP BY l.guest_id, l.source)",
        in_id_list("l.guest_id", 1)
    );
    let mut latest: HashMap<(GuestId, String), (i64, String)> = sqlx::query_as(&sql)
        .bind(id_list(ids()))
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(
            |(guest, source, id, stable): (GuestId, String, i64, String)| {
                ((guest, source), (id, stable))
            },
        )
        .collect();
    let previous: Vec<Option<(i64, String)>> = items
        .iter()
        .map(|item| latest.remove(&(item.guest_id, item.facts.source.to_string())))
        .collect();
    let unchanged = |n: usize| {
        let stable = previous[n].as_ref().map(|(_, stable)| stable.as_str());
        stable == Some(items[n].facts.stable_json.as_str())
    };

    let refreshed: Vec<(i64, &FactsToStore<'_>)> = (0..items.len())
        .filter(|&n| unchanged(n))
        .filter_map(|n| Some((previous[n].as_ref()?.0, &items[n])))
        .collect();
    for chunk in refreshed.chunks(ROWS_PER_STATEMENT) {
        // VALUES names its columns column1, column2 on both databases.
        let mut update = QueryBuilder::<DB>::new(
            "UPDATE guest_facts SET received_ms = v.column2, facts_json = v.column3 FROM (",
        );
        update.push_values(chunk, |mut row, (id, item)| {
            row.push_bind(*id)
                .push_bind(item.received_ms)
                .push_bind(&item.facts.facts_json);
        });
        update.push(") AS v WHERE guest_facts.id = v.column1");
        update.build().execute(&mut *conn).await?;
    }

    let added: Vec<&FactsToStore<'_>> = (0..items.len())
        .filter(|&n| !unchanged(n))
        .map(|n| &items[n])
        .collect();
    for chunk in added.chunks(ROWS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO guest_facts (guest_id, source, first_received_ms, received_ms,
                kernel_release, cmdline, stable_json, facts_json) ",
        );
        insert.push_values(chunk, |mut row, item| {
            let facts = item.facts;
            row.push_bind(item.guest_id)
                .push_bind(facts.source)
                .push_bind(item.received_ms)
                .push_bind(item.received_ms)
                .push_bind(&facts.facts.kernel_release)
                .push_bind(&facts.facts.cmdline)
                .push_bind(&facts.stable_json)
                .push_bind(&facts.facts_json);
        });
        insert.build().execute(&mut *conn).await?;
    }
    if !added.is_empty() {
        let sql = format!(
            "DELETE FROM guest_facts WHERE id IN (
                SELECT id FROM (
                    SELECT id, ROW_NUMBER() OVER (PARTITION BY guest_id, source
                                                  ORDER BY id DESC) AS newer
                    FROM guest_facts WHERE {}) AS ranked
                WHERE newer > $2)",
            in_id_list("guest_id", 1)
        );
        sqlx::query(&sql)
            .bind(id_list(added.iter().map(|item| item.guest_id.0)))
            .bind(MAX_EVENTS_PER_SOURCE)
            .execute(&mut *conn)
            .await?;
    }

    Ok(items
        .iter()
        .zip(readings)
        .enumerate()
        .map(|(n, (item, reading))| StoredFacts {
            source: item.facts.source.to_string(),
            received_ms: item.received_ms,
            facts_json: item.facts.facts_json.clone(),
            reading,
            // The first facts of a source are not a change; later distinct ones are.
            changed: previous[n].is_some() && !unchanged(n),
        })
        .collect())
}

impl Store {
    pub async fn record_guest_facts(
        &self,
        token_id: TokenId,
        uuid: &str,
        facts: &ValidFacts,
        now_ms: i64,
        decide: impl Fn(&TokenBinding, &[Candidate], bool) -> Result<Delivery, Refusal>,
    ) -> StoreResult<Result<DeliveredFacts, Refusal>> {
        // The write lock: the token's binding is read, then written, and two probes posting
        // with new tokens for one guest at once must not both take it.
        let mut tx = self.begin_write().await?;
        let (bound_uuid, pinned_host, bound_guest): (
            Option<String>,
            Option<String>,
            Option<GuestId>,
        ) = sqlx::query_as("SELECT guest_uuid, host_name, guest_id FROM tokens WHERE id = $1")
            .bind(token_id)
            .fetch_one(&mut *tx)
            .await?;
        let [as_sent, swapped] = crate::ingest::facts::uuid_forms(uuid);
        let candidates: Vec<Candidate> = sqlx::query_as::<_, (GuestId, String, i64, i64)>(
            "SELECT g.id, h.name, g.last_seen_ms, h.reports_stored - g.last_report_n
             FROM guests g JOIN hosts h ON h.id = g.host_id
             WHERE g.uuid IN ($1, $2) ORDER BY g.id",
        )
        .bind(&as_sent)
        .bind(&swapped)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(guest, host, last_seen_ms, missed_reports)| Candidate {
            guest,
            host,
            last_seen_ms,
            missed_reports,
        })
        .collect();
        // A revoked token no longer holds its guest, so that a guest whose token was revoked can
        // be given a new one.
        let held_elsewhere: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tokens
                WHERE role = 'guest' AND guest_uuid IN ($1, $2) AND id <> $3
                  AND revoked_ms IS NULL)",
        )
        .bind(&as_sent)
        .bind(&swapped)
        .bind(token_id)
        .fetch_one(&mut *tx)
        .await?;
        let token = TokenBinding {
            uuid: bound_uuid,
            pinned_host,
            guest: bound_guest,
        };
        let delivery = match decide(&token, &candidates, held_elsewhere) {
            Ok(delivery) => delivery,
            Err(refusal) => {
                tx.rollback().await?;
                return Ok(Err(refusal));
            }
        };
        sqlx::query(
            "UPDATE tokens SET guest_uuid = COALESCE(guest_uuid, $1),
                guest_id = CASE WHEN $2 THEN $3 ELSE guest_id END, last_used_ms = $4
             WHERE id = $5",
        )
        .bind(uuid)
        .bind(delivery.binds)
        .bind(delivery.guest)
        .bind(now_ms)
        .bind(token_id)
        .execute(&mut *tx)
        .await?;
        let item = FactsToStore {
            guest_id: delivery.guest,
            facts,
            received_ms: now_ms,
        };
        let stored = record_facts(&mut tx, &[item])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Corrupt("facts stored for no guest".into()))?;
        let host_id: HostId = sqlx::query_scalar("SELECT host_id FROM guests WHERE id = $1")
            .bind(delivery.guest)
            .fetch_one(&mut *tx)
            .await?;
        self.announce_hosts(&mut tx, vec![host_id]).await?;
        tx.commit().await?;
        Ok(Ok(DeliveredFacts {
            guest_id: delivery.guest,
            host_id,
            moved_from: delivery.moved_from,
            stored,
        }))
    }

    pub async fn latest_facts(&self, hosts: Option<&[HostId]>) -> StoreResult<Vec<FactsRow>> {
        let Some(hosts) = hosts else {
            // Every guest's: one pass over the table.
            return Ok(sqlx::query_as(
                "SELECT f.guest_id, f.source, f.received_ms, f.facts_json,
                        (SELECT g.vm_process_since_ms FROM guests g WHERE g.id = f.guest_id)
                            AS process_since_ms
                 FROM guest_facts f
                 WHERE f.id IN (SELECT MAX(id) FROM guest_facts GROUP BY guest_id, source)
                 ORDER BY f.id",
            )
            .fetch_all(&self.pool)
            .await?);
        };
        // Some hosts' guests': each guest's rows and each source's newest looked up in
        // `guest_facts_guest`, never a pass over every guest's facts.
        let sql = format!(
            "SELECT f.guest_id, f.source, f.received_ms, f.facts_json,
                    g.vm_process_since_ms AS process_since_ms
             FROM guests g {JOIN_IN_ORDER} guest_facts f ON f.guest_id = g.id
             WHERE {}
               AND f.id = (SELECT MAX(f2.id) FROM guest_facts f2
                           WHERE f2.guest_id = f.guest_id AND f2.source = f.source)
             ORDER BY f.id",
            in_id_list("g.host_id", 1)
        );
        Ok(sqlx::query_as(&sql)
            .bind(id_list(hosts.iter().map(|id| id.0)))
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn facts_spans(&self, guest_id: GuestId) -> StoreResult<Vec<FactsSpanRow>> {
        Ok(sqlx::query_as(
            "SELECT source, first_received_ms, received_ms, facts_json
             FROM guest_facts WHERE guest_id = $1 ORDER BY id",
        )
        .bind(guest_id)
        .fetch_all(&self.pool)
        .await?)
    }

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

    pub async fn fact_changes(
        &self,
        guest_id: Option<GuestId>,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT f.guest_id, f.source, f.first_received_ms FROM guest_facts f
             WHERE (CAST($1 AS BIGINT) IS NULL OR f.guest_id = $1)
               AND EXISTS (SELECT 1 FROM guest_facts e
                           WHERE e.guest_id = f.guest_id AND e.source = f.source AND e.id < f.id)
             ORDER BY f.guest_id, f.first_received_ms, f.id",
        )
        .bind(guest_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn fact_changes_of_host(
        &self,
        host_id: HostId,
    ) -> StoreResult<Vec<(GuestId, String, i64)>> {
        let sql = format!(
            "SELECT f.guest_id, f.source, f.first_received_ms
             FROM guests g {JOIN_IN_ORDER} guest_facts f ON f.guest_id = g.id
             WHERE g.host_id = $1
               AND EXISTS (SELECT 1 FROM guest_facts e
                           WHERE e.guest_id = f.guest_id AND e.source = f.source AND e.id < f.id)
             ORDER BY f.guest_id, f.first_received_ms, f.id"
        );
        Ok(sqlx::query_as(&sql)
            .bind(host_id)
            .fetch_all(&self.pool)
            .await?)
    }
}
