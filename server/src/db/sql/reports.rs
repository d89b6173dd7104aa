//! Reports and their samples: one transaction per batch and a savepoint per report. A report
//! that fails is rolled back to its savepoint before the next one runs (PostgreSQL refuses
//! every statement of a transaction once one failed; SQLite would carry on). The upserts name
//! the row they update (`g.`, `hosts.`), which PostgreSQL needs to tell it from `excluded`;
//! unsigned counts are bound as 64-bit integers.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{DB, GREATEST, JOIN_IN_ORDER, NAME_NOT_LIKE_PARAM_1, Store, WriteTx};
use crate::db::error::{StoreError, StoreResult};
use crate::db::reports::{
    ReportToStore, StoreOutcome, StoredGuest, UpsertedGuest, stored_halt_poll_s, stored_parts,
};
use crate::domain::{GuestId, HostId, ReportId, TokenId};
use crate::ingest::ValidReport;
use crate::ingest::host_binding::{HostClaim, may_report};
use crate::ingest::process_totals::{SampleSpan, StoredTotals};
use crate::ingest::samples::PreviousTotals;

/// When a report's totals replace the stored ones (`g` the guest's row as stored): a report that
/// ends before the stored totals were read (it arrived late) must not set them back.
const NEWER_TOTALS: &str = "(excluded.totals_at_ms IS NULL OR g.totals_at_ms IS NULL
    OR excluded.totals_at_ms >= g.totals_at_ms)";

/// Guests written per statement: 20 values each, well under SQLite's 32,766 parameters and
/// PostgreSQL's 65,535.
const ROWS_PER_STATEMENT: usize = 1000;

impl Store {
    pub async fn store_reports(
        &self,
        batch: &[ReportToStore<'_>],
        decide_samples: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<Vec<StoreResult<StoreOutcome>>> {
        // The write lock is taken up front, so two copies of one report arriving at once (at
        // this server or another) queue behind each other and the second sees the first
        // instead of failing on the unique key.
        let mut tx = self.begin_write().await?;
        let mut outcomes = Vec::with_capacity(batch.len());
        sqlx::query("SAVEPOINT report").execute(&mut *tx).await?;
        for (n, item) in batch.iter().enumerate() {
            let outcome = store_one(&mut tx, item, &decide_samples).await;
            let keep = matches!(outcome, Ok(StoreOutcome::Stored { .. }));
            if !keep {
                // Also what lets the batch go on after a report's statement failed: PostgreSQL
                // refuses every statement of an aborted transaction until it is rolled back to
                // a savepoint. A failed ROLLBACK TO (the connection lost) fails the batch, and
                // dropping the transaction rolls it all back.
                sqlx::query("ROLLBACK TO SAVEPOINT report")
                    .execute(&mut *tx)
                    .await?;
            }
            // The next report's savepoint in the same round trip (a handful of statements
            // make a report: each one saved counts).
            let last = n + 1 == batch.len();
            let next = if last {
                "RELEASE SAVEPOINT report"
            } else {
                "RELEASE SAVEPOINT report; SAVEPOINT report"
            };
            // A text without arguments: PostgreSQL's simple protocol, which takes two statements.
            sqlx::Executor::execute(&mut *tx, next).await?;
            outcomes.push(outcome);
        }
        // When each token was last used: once a batch, not once a report.
        let mut used: Vec<(TokenId, i64)> = batch
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| matches!(o, Ok(StoreOutcome::Stored { .. })))
            .map(|(item, _)| (item.token_id, item.received_ms))
            .collect();
        used.sort_unstable_by_key(|&(token, at_ms)| (token, std::cmp::Reverse(at_ms)));
        used.dedup_by_key(|(token, _)| *token);
        for chunk in used.chunks(ROWS_PER_STATEMENT) {
            // VALUES names its columns column1, column2 on both databases.
            let mut update =
                QueryBuilder::<DB>::new("UPDATE tokens SET last_used_ms = v.column2 FROM (");
            update.push_values(chunk, |mut row, (token, at_ms)| {
                row.push_bind(*token).push_bind(*at_ms);
            });
            update.push(") AS v WHERE tokens.id = v.column1");
            update.build().execute(&mut *tx).await?;
        }
        // The other servers read these hosts again once this commits.
        let hosts = outcomes
            .iter()
            .filter_map(|o| match o {
                Ok(StoreOutcome::Stored { host_id, .. }) => Some(*host_id),
                _ => None,
            })
            .collect();
        self.announce_hosts(&mut tx, hosts).await?;
        tx.commit().await?;
        Ok(outcomes)
    }

    pub async fn store_lone_report(
        &self,
        report: &ValidReport,
        token_id: TokenId,
        received_ms: i64,
        decide_samples: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<StoreOutcome> {
        let batch = [ReportToStore {
            report,
            token_id,
            received_ms,
        }];
        self.store_reports(&batch, decide_samples)
            .await?
            .pop()
            .unwrap_or_else(|| Err(StoreError::Corrupt("a batch of one stored nothing".into())))
    }
}

/// Stores one report inside the batch's transaction (see [`Store::store_reports`]).
async fn store_one(
    tx: &mut WriteTx,
    item: &ReportToStore<'_>,
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<StoreOutcome> {
    let (report, token_id, now_ms) = (item.report, item.token_id, item.received_ms);
    // Which host the token may report for is ingest's decision, from what is read here; with
    // it (one round trip), whether this report is a repeat. A report is a repeat only of one
    // for the same host: another host's token cannot have this host's reports taken for
    // duplicates.
    let sql = format!(
        "SELECT t.host_name, (SELECT r.id FROM hosts h {JOIN_IN_ORDER} reports r ON r.host_id = h.id
                              WHERE h.name = $2 AND r.agent_id = $3 AND r.run_id = $4
                                AND r.seq = $5)
         FROM tokens t WHERE t.id = $1"
    );
    let (bound_host, seen): (Option<String>, Option<ReportId>) = sqlx::query_as(&sql)
        .bind(token_id)
        .bind(&report.host.name)
        .bind(&report.agent_id)
        .bind(&report.run_id)
        .bind(report.seq)
        .fetch_one(&mut **tx)
        .await?;
    let unbound = bound_host.is_none();
    let claim = match bound_host {
        Some(bound) => HostClaim::Bound(bound),
        None => HostClaim::Unbound {
            host_taken: sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM tokens
                                WHERE role = 'agent' AND host_name = $1 AND id <> $2)
                     OR EXISTS (SELECT 1 FROM hosts WHERE name = $1)",
            )
            .bind(&report.host.name)
            .bind(token_id)
            .fetch_one(&mut **tx)
            .await?,
        },
    };
    may_report(&claim, &report.host.name).map_err(StoreError::Refused)?;
    if seen.is_some() {
        return Ok(StoreOutcome::Duplicate);
    }

    let host = &report.host;
    let sql = format!(
        "INSERT INTO hosts (name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
            last_report_ms, agent_dropped_reports, blind_spots_json, reports_stored)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1)
         ON CONFLICT (name) DO UPDATE SET
            blind_spots_json = excluded.blind_spots_json,
            cpus = excluded.cpus, kernel = excluded.kernel,
            agent_version = excluded.agent_version, kvm_halt_poll_ns = excluded.kvm_halt_poll_ns,
            last_report_ms = {GREATEST}(hosts.last_report_ms, excluded.last_report_ms),
            agent_dropped_reports =
                {GREATEST}(hosts.agent_dropped_reports, excluded.agent_dropped_reports),
            reports_stored = hosts.reports_stored + 1
         RETURNING id, reports_stored"
    );
    let (host_id, host_reports): (HostId, i64) = sqlx::query_as(&sql)
        .bind(&host.name)
        .bind(i64::from(host.cpus))
        .bind(&host.kernel)
        .bind(&report.agent_version)
        .bind(host.kvm_halt_poll_ns)
        .bind(now_ms)
        .bind(now_ms)
        .bind(report.dropped_reports)
        .bind(&host.blind_spots_json)
        .fetch_one(&mut **tx)
        .await?;

    let report_id: ReportId = sqlx::query_scalar(
        "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms, length_ms, received_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(host_id)
    .bind(token_id)
    .bind(&report.agent_id)
    .bind(&report.run_id)
    .bind(report.seq)
    .bind(report.start_ms)
    .bind(report.end_ms)
    .bind(report.length_ms)
    .bind(now_ms)
    .fetch_one(&mut **tx)
    .await?;

    // The host's guests' running totals as of their previous reports, read once.
    let previous: PreviousTotals = sqlx::query_as::<_, (String, String, String, f64, i64, i64)>(
        "SELECT hypervisor, identity, process_key, cpu_s_total, wakeups_total, totals_at_ms
         FROM guests WHERE host_id = $1 AND process_key IS NOT NULL",
    )
    .bind(host_id)
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .map(
        |(hypervisor, identity, process_key, host_cpu_s, vcpu_wakeups, at_ms)| {
            let totals = StoredTotals {
                process_key,
                host_cpu_s,
                vcpu_wakeups,
                at_ms,
            };
            ((hypervisor, identity), totals)
        },
    )
    .collect();

    // What each guest's sample stores is ingest's decision, from the totals read above in
    // this same transaction: a copy of the report arriving meanwhile waits for the lock.
    let spans = decide_samples(report, &previous);
    if spans.len() != report.guests.len() {
        return Err(StoreError::Corrupt(format!(
            "{} samples planned for {} guests",
            spans.len(),
            report.guests.len()
        )));
    }

    let mut stored = Vec::with_capacity(report.guests.len());
    // A few statements per report, not a few per guest: a round trip to the database server
    // each.
    for (guests, spans) in report
        .guests
        .chunks(ROWS_PER_STATEMENT)
        .zip(spans.chunks(ROWS_PER_STATEMENT))
    {
        // A report names each guest once (ingest makes identities unique), as PostgreSQL
        // requires of one upsert: it refuses to update a row twice in one statement.
        let mut upsert = QueryBuilder::<DB>::new(
            "INSERT INTO guests AS g (host_id, hypervisor, identity, name, uuid, management, vcpus,
                pid, boot_args, uses_kvm, cpu_source, hyperv, hpet, os_hint, platform, first_seen_ms,
                last_seen_ms, process_key, cpu_s_total, wakeups_total, totals_at_ms, vm_process,
                vm_process_since_ms, last_report_n) ",
        );
        upsert.push_values(guests, |mut row, guest| {
            let totals = guest.totals.as_ref();
            row.push_bind(host_id)
                .push_bind(guest.hypervisor.as_str())
                .push_bind(&guest.identity)
                .push_bind(&guest.name)
                .push_bind(&guest.uuid)
                .push_bind(&guest.management)
                .push_bind(i64::from(guest.vcpus))
                .push_bind(i64::from(guest.pid))
                .push_bind(&guest.boot_args)
                .push_bind(guest.uses_kvm)
                .push_bind(guest.cpu_source)
                .push_bind(guest.vm_config.hyperv.as_ref().map(|flags| flags.join(",")))
                .push_bind(guest.vm_config.hpet)
                .push_bind(&guest.vm_config.os_hint)
                .push_bind(&guest.platform_json)
                .push_bind(now_ms)
                .push_bind(now_ms)
                .push_bind(totals.map(|t| &t.process_key))
                .push_bind(totals.map(|t| t.host_cpu_s))
                .push_bind(totals.map(|t| t.vcpu_wakeups))
                .push_bind(totals.map(|_| report.end_ms))
                .push_bind(&guest.vm_process)
                .push_bind(now_ms)
                .push_bind(host_reports);
        });
        // Every SET expression reads the row as it was stored (vm_process_since_ms compares
        // the stored vm_process, not the one set beside it), on PostgreSQL as on SQLite.
        upsert.push(
            " ON CONFLICT (host_id, hypervisor, identity) DO UPDATE SET
                name = excluded.name, uuid = excluded.uuid, management = excluded.management,
                vcpus = excluded.vcpus, pid = excluded.pid, boot_args = excluded.boot_args,
                uses_kvm = excluded.uses_kvm, cpu_source = excluded.cpu_source,
                hyperv = excluded.hyperv, hpet = excluded.hpet, os_hint = excluded.os_hint,
                platform = excluded.platform,
                last_seen_ms = {GREATEST}(g.last_seen_ms, excluded.last_seen_ms),
                last_report_n = excluded.last_report_n,
                process_key = CASE WHEN {NEWER} THEN excluded.process_key ELSE g.process_key END,
                cpu_s_total = CASE WHEN {NEWER} THEN excluded.cpu_s_total ELSE g.cpu_s_total END,
                wakeups_total =
                    CASE WHEN {NEWER} THEN excluded.wakeups_total ELSE g.wakeups_total END,
                totals_at_ms = CASE WHEN {NEWER} THEN excluded.totals_at_ms ELSE g.totals_at_ms END,
                vm_process = CASE WHEN {NEWER} THEN excluded.vm_process ELSE g.vm_process END,
                vm_process_since_ms = CASE
                    WHEN NOT {NEWER} OR g.vm_process IS NULL
                        OR g.vm_process IS NOT DISTINCT FROM excluded.vm_process
                        THEN g.vm_process_since_ms
                    ELSE excluded.vm_process_since_ms END
             RETURNING hypervisor, identity, id, name, uuid, management, vcpus, pid, boot_args,
                uses_kvm, cpu_source, hyperv, hpet, os_hint, platform, last_seen_ms, first_seen_ms,
                vm_process_since_ms, {TOTALS}"
                .replace("{NEWER}", NEWER_TOTALS)
                .replace("{GREATEST}", GREATEST)
                .replace("{TOTALS}", &super::process_totals::totals_columns("")),
        );
        // RETURNING comes in no promised order: match the rows by guest.
        let mut rows: HashMap<(String, String), UpsertedGuest> = upsert
            .build_query_as::<UpsertedGuest>()
            .fetch_all(&mut **tx)
            .await?
            .into_iter()
            .map(|row| ((row.hypervisor.clone(), row.identity.clone()), row))
            .collect();
        let upserted = guests
            .iter()
            .map(|guest| {
                rows.remove(&(
                    guest.hypervisor.as_str().to_string(),
                    guest.identity.clone(),
                ))
                .ok_or_else(|| {
                    StoreError::Corrupt(format!("no id stored for guest {:?}", guest.identity))
                })
            })
            .collect::<StoreResult<Vec<UpsertedGuest>>>()?;
        let guest_ids: Vec<GuestId> = upserted.iter().map(|row| row.id).collect();

        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
                host_cpu_s, vcpu_wakeups, wakeups_source, vcpu_cpu_s, iothread_cpu_s,
                vhost_cpu_s, halt_poll_s) ",
        );
        insert.push_values(
            guests.iter().zip(spans).zip(&guest_ids),
            |mut row, ((guest, span), guest_id)| {
                row.push_bind(*guest_id)
                    .push_bind(report_id)
                    .push_bind(report.end_ms)
                    .push_bind(now_ms)
                    .push_bind(span.length_ms)
                    .push_bind(i64::from(guest.vcpus))
                    .push_bind(span.host_cpu_s)
                    .push_bind(span.vcpu_wakeups)
                    .push_bind(guest.wakeups_source);
                let parts = stored_parts(guest, span);
                row.push_bind(parts.map(|p| f64::from(p.vcpus_s)))
                    .push_bind(parts.map(|p| f64::from(p.iothreads_s)))
                    .push_bind(parts.map(|p| f64::from(p.vhost_s)))
                    .push_bind(stored_halt_poll_s(guest, span).map(f64::from));
            },
        );
        insert.build().execute(&mut **tx).await?;

        for ((guest, span), row) in guests.iter().zip(spans).zip(upserted) {
            let facts = match &guest.facts {
                Some(facts) => Some(super::facts::record_facts(tx, row.id, facts, now_ms).await?),
                None => None,
            };
            stored.push(StoredGuest::assemble(
                report,
                host_id,
                host_reports,
                guest,
                span,
                row,
                now_ms,
                facts,
            ));
        }
    }

    // The first report binds a token made without --host to its host (when it was last used
    // is written once a batch, by the caller).
    if unbound {
        sqlx::query("UPDATE tokens SET host_name = COALESCE(host_name, $1) WHERE id = $2")
            .bind(&report.host.name)
            .bind(token_id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(StoreOutcome::Stored {
        report_id,
        host_id,
        host_reports,
        guests: stored,
    })
}

impl Store {
    pub async fn count_reports_and_samples(&self) -> StoreResult<(i64, i64)> {
        sqlx::query_as("SELECT (SELECT COUNT(*) FROM reports), (SELECT COUNT(*) FROM samples)")
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from)
    }
}

impl Store {
    pub async fn count_hosts_not_like(&self, pattern: &str) -> StoreResult<i64> {
        let sql = format!("SELECT COUNT(*) FROM hosts WHERE {NAME_NOT_LIKE_PARAM_1}");
        Ok(sqlx::query_scalar(&sql)
            .bind(pattern)
            .fetch_one(&self.pool)
            .await?)
    }
}
