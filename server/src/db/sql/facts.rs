//! Guest facts and idle readings. Reads that need no order of their own come by id, so that
//! the order does not depend on the plan (PostgreSQL's hash plans give none).

use super::dialect::{Conn, Store, id_list, in_id_list, looked_up_for_each};
use crate::db::error::StoreResult;
use crate::db::facts::{DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow, StoredFacts};
use crate::db::facts::{IDLE_READING_MIN_GAP_MS, IDLE_READINGS_KEPT_MS, MAX_EVENTS_PER_SOURCE};
use crate::db::guests::IdleReading;
use crate::domain::{GuestId, HostId, TokenId};
use crate::ingest::binding::{Candidate, Delivery, Refusal, TokenBinding};
use crate::ingest::facts::ValidFacts;

async fn record_idle_reading(
    conn: &mut Conn,
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
/// transaction's (ingest's, or [`Store::record_guest_facts`]'s).
pub(super) async fn record_facts(
    conn: &mut Conn,
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
        let stored = record_facts(&mut tx, delivery.guest, facts, now_ms).await?;
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
