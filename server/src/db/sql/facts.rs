//! Guest facts and idle readings. Reads that need no order of their own come by id, so that
//! the order does not depend on the plan (PostgreSQL's hash plans give none).

use std::collections::{HashMap, HashSet};

use sqlx::QueryBuilder;

use super::dialect::{Conn, DB, Store, id_list, in_id_list, looked_up_for_each};
use crate::db::error::{StoreError, StoreResult};
use crate::db::facts::{DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow, StoredFacts};
use crate::db::facts::{IDLE_READING_MIN_GAP_MS, IDLE_READINGS_KEPT_MS, MAX_EVENTS_PER_SOURCE};
use crate::db::guests::IdleReading;
use crate::db::reports::PLANNED_EACH_TIME;
use crate::db::rows_at_once::runs;
use crate::domain::{GuestId, HostId, TokenId};
use crate::ingest::binding::{Candidate, Delivery, Refusal, TokenBinding};
use crate::ingest::facts::ValidFacts;

/// Facts a guest delivered, to be recorded (`now_ms` on the server clock).
pub(super) struct FactsToRecord<'a> {
    pub guest_id: GuestId,
    pub facts: &'a ValidFacts,
    pub now_ms: i64,
}

/// Facts rows written or read per statement at most, in runs of the few lengths
/// `rows_at_once` allows: up to 8 values each.
const FACTS_PER_STATEMENT: usize = 512;

/// Records each guest's facts, in a handful of statements whatever their number (a report's
/// guests', or a batch's): for each, its idle reading unless the guest's source gave one
/// within [`IDLE_READING_MIN_GAP_MS`] (dropping its readings older than
/// [`IDLE_READINGS_KEPT_MS`]); then the source's newest row refreshed when the facts did not
/// change, or a row added when they did (dropping the oldest beyond
/// [`MAX_EVENTS_PER_SOURCE`]). Each guest appears once in `items`. `conn` is a write
/// transaction's (ingest's, or [`Store::record_guest_facts`]'s). What was stored comes back in
/// the order of `items`.
pub(super) async fn record_facts(
    conn: &mut Conn,
    items: &[FactsToRecord<'_>],
) -> StoreResult<Vec<StoredFacts>> {
    let mut stored = Vec::with_capacity(items.len());
    for chunk in runs(items, FACTS_PER_STATEMENT) {
        let readings = record_idle_readings(conn, chunk).await?;
        let changed = record_facts_rows(conn, chunk).await?;
        for ((item, reading), changed) in chunk.iter().zip(readings).zip(changed) {
            stored.push(StoredFacts {
                source: item.facts.source.to_string(),
                received_ms: item.now_ms,
                facts_json: item.facts.facts_json.clone(),
                reading,
                changed,
            });
        }
    }
    Ok(stored)
}

/// The idle readings of `items` (see [`record_facts`]), in their order: `None` for a guest
/// that sent none, or one too soon after its last.
async fn record_idle_readings(
    conn: &mut Conn,
    items: &[FactsToRecord<'_>],
) -> StoreResult<Vec<Option<IdleReading>>> {
    let fractions: Vec<Option<f64>> = items
        .iter()
        .map(|item| {
            item.facts
                .facts
                .idle_fraction
                .filter(|f| (0.0..=1.0).contains(f))
        })
        .collect();
    let with_reading: Vec<&FactsToRecord<'_>> = items
        .iter()
        .zip(&fractions)
        .filter(|(_, fraction)| fraction.is_some())
        .map(|(item, _)| item)
        .collect();
    if with_reading.is_empty() {
        return Ok(vec![None; items.len()]);
    }
    // The guests whose source gave a reading within the gap, looked up guest by guest.
    let mut recent: HashSet<GuestId> = HashSet::new();
    for run in runs(&with_reading, FACTS_PER_STATEMENT) {
        let mut recent_query = QueryBuilder::<DB>::new("SELECT DISTINCT v.column1 FROM (");
        recent_query.push_values(run, |mut row, item| {
            row.push_bind(item.guest_id)
                .push_bind(item.now_ms - IDLE_READING_MIN_GAP_MS)
                .push_bind(item.facts.source);
        });
        recent_query.push(") AS v ");
        recent_query.push(looked_up_for_each(
            "guest_idle_readings",
            "r",
            "r.guest_id = v.column1 AND r.received_ms > v.column2 AND r.source = v.column3",
        ));
        recent.extend(
            recent_query
                .build_query_scalar::<GuestId>()
                .fetch_all(&mut *conn)
                .await?,
        );
    }
    let readings: Vec<Option<IdleReading>> = items
        .iter()
        .zip(fractions)
        .map(|(item, fraction)| {
            let idle_fraction = fraction.filter(|_| !recent.contains(&item.guest_id))?;
            Some(IdleReading {
                guest_id: item.guest_id,
                source: item.facts.source.to_string(),
                received_ms: item.now_ms,
                measured_ms: item
                    .facts
                    .facts
                    .idle_measured_s
                    .map(|s| (s * 1000.0).round() as i64),
                idle_fraction,
            })
        })
        .collect();
    let new: Vec<&IdleReading> = readings.iter().flatten().collect();
    if new.is_empty() {
        return Ok(readings);
    }
    for run in runs(&new, FACTS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO guest_idle_readings (guest_id, source, received_ms, measured_ms, idle_fraction) ",
        );
        insert.push_values(run, |mut row, reading| {
            row.push_bind(reading.guest_id)
                .push_bind(&reading.source)
                .push_bind(reading.received_ms)
                .push_bind(reading.measured_ms)
                .push_bind(reading.idle_fraction);
        });
        insert.build().execute(&mut *conn).await?;
    }
    // Older readings of the guests read now go. One cut-off for all, the earliest of theirs:
    // what the others' own cut-offs would also drop (a second or so later) goes with their
    // next reading.
    let oldest_now_ms = new.iter().map(|r| r.received_ms).min().unwrap_or_default();
    let sql = format!(
        "DELETE FROM guest_idle_readings WHERE {} AND received_ms < $2",
        in_id_list("guest_id", 1)
    );
    sqlx::query(&sql)
        .persistent(PLANNED_EACH_TIME)
        .bind(id_list(new.iter().map(|r| r.guest_id.0)))
        .bind(oldest_now_ms - IDLE_READINGS_KEPT_MS)
        .execute(&mut *conn)
        .await?;
    Ok(readings)
}

/// Refreshes or adds each guest's facts row of its source (see [`record_facts`]); whether each
/// guest's facts changed, in the order of `items`.
async fn record_facts_rows(conn: &mut Conn, items: &[FactsToRecord<'_>]) -> StoreResult<Vec<bool>> {
    // Each guest's newest row of its source, looked up in `guest_facts_guest`.
    let mut latest: HashMap<GuestId, (i64, String)> = HashMap::with_capacity(items.len());
    for run in runs(items, FACTS_PER_STATEMENT) {
        let mut latest_query =
            QueryBuilder::<DB>::new("SELECT v.column1, f.id, f.stable_json FROM (");
        latest_query.push_values(run, |mut row, item| {
            row.push_bind(item.guest_id).push_bind(item.facts.source);
        });
        latest_query.push(") AS v ");
        latest_query.push(looked_up_for_each(
            "guest_facts",
            "f",
            "f.id = (SELECT MAX(x.id) FROM guest_facts x
                     WHERE x.guest_id = v.column1 AND x.source = v.column2)",
        ));
        latest.extend(
            latest_query
                .build_query_as::<(GuestId, i64, String)>()
                .fetch_all(&mut *conn)
                .await?
                .into_iter()
                .map(|(guest_id, id, stable)| (guest_id, (id, stable))),
        );
    }
    let mut refreshed: Vec<(i64, &FactsToRecord<'_>)> = Vec::new();
    let mut added: Vec<&FactsToRecord<'_>> = Vec::new();
    let mut changed = Vec::with_capacity(items.len());
    for item in items {
        match latest.get(&item.guest_id) {
            Some((id, stable)) if *stable == item.facts.stable_json => {
                refreshed.push((*id, item));
                changed.push(false);
            }
            // The first facts of a source are not a change; later distinct ones are.
            newest => {
                added.push(item);
                changed.push(newest.is_some());
            }
        }
    }
    for run in runs(&refreshed, FACTS_PER_STATEMENT) {
        // VALUES names its columns column1, column2 on both databases.
        let mut update = QueryBuilder::<DB>::new(
            "UPDATE guest_facts SET received_ms = v.column2, facts_json = v.column3 FROM (",
        );
        update.push_values(run, |mut row, (id, item)| {
            row.push_bind(*id)
                .push_bind(item.now_ms)
                .push_bind(&item.facts.facts_json);
        });
        update.push(") AS v WHERE guest_facts.id = v.column1");
        update.build().execute(&mut *conn).await?;
    }
    if !added.is_empty() {
        for run in runs(&added, FACTS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO guest_facts (guest_id, source, first_received_ms, received_ms, kernel_release, cmdline, stable_json, facts_json) ",
            );
            insert.push_values(run, |mut row, item| {
                row.push_bind(item.guest_id)
                    .push_bind(item.facts.source)
                    .push_bind(item.now_ms)
                    .push_bind(item.now_ms)
                    .push_bind(&item.facts.facts.kernel_release)
                    .push_bind(&item.facts.facts.cmdline)
                    .push_bind(&item.facts.stable_json)
                    .push_bind(&item.facts.facts_json);
            });
            insert.build().execute(&mut *conn).await?;
        }
        // Each source keeps its newest rows of each guest.
        let sql = format!(
            "DELETE FROM guest_facts WHERE id IN (
                 SELECT id FROM (
                     SELECT id, ROW_NUMBER() OVER (PARTITION BY guest_id, source ORDER BY id DESC) AS n
                     FROM guest_facts WHERE {}
                 ) AS ranked WHERE n > $2
             )",
            in_id_list("guest_id", 1)
        );
        sqlx::query(&sql)
            .persistent(PLANNED_EACH_TIME)
            .bind(id_list(added.iter().map(|item| item.guest_id.0)))
            .bind(MAX_EVENTS_PER_SOURCE)
            .execute(&mut *conn)
            .await?;
    }
    Ok(changed)
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
        let item = FactsToRecord {
            guest_id: delivery.guest,
            facts,
            now_ms,
        };
        let stored = record_facts(&mut tx, std::slice::from_ref(&item))
            .await?
            .pop()
            .ok_or_else(|| StoreError::Corrupt("facts recorded for no guest".into()))?;
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
             FROM guests g {}
             WHERE {}
             ORDER BY f.id",
            looked_up_for_each(
                "guest_facts",
                "f",
                "f.guest_id = g.id
                 AND f.id = (SELECT MAX(f2.id) FROM guest_facts f2
                             WHERE f2.guest_id = g.id AND f2.source = f.source)"
            ),
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
             FROM guests g {}
             WHERE g.host_id = $1
             ORDER BY f.guest_id, f.first_received_ms, f.id",
            looked_up_for_each(
                "guest_facts",
                "f",
                "f.guest_id = g.id
                 AND EXISTS (SELECT 1 FROM guest_facts e
                             WHERE e.guest_id = g.id AND e.source = f.source AND e.id < f.id)"
            )
        );
        Ok(sqlx::query_as(&sql)
            .bind(host_id)
            .fetch_all(&self.pool)
            .await?)
    }
}
