//! Reports and their samples, in SQLite: one transaction per report.

use std::collections::HashMap;

use sqlx::{QueryBuilder, Sqlite};

use super::store::SqliteDb;
use super::write_tx::WriteTx;
use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::{GuestRow, IntervalRow};
use crate::db::reports::{ReportToStore, StoreOutcome, StoredGuest};
use crate::domain::{GuestId, HostId, ReportId, TokenId};
use crate::ingest::ValidReport;
use crate::ingest::samples::PreviousTotals;
use crate::ingest::totals::{SampleSpan, StoredTotals};
use tickscope_agent::wire::WakeupsSource;

/// When a report's totals replace the stored ones: a report that ends before the stored totals
/// were read (it arrived late) must not set them back.
const NEWER_TOTALS: &str = "(excluded.totals_at_ms IS NULL OR totals_at_ms IS NULL
    OR excluded.totals_at_ms >= totals_at_ms)";

/// A guest's row as its upsert left it.
#[derive(sqlx::FromRow)]
struct UpsertedGuest {
    hypervisor: String,
    identity: String,
    id: GuestId,
    name: String,
    uuid: Option<String>,
    management: Option<String>,
    vcpus: u32,
    pid: i64,
    boot_args: Option<String>,
    uses_kvm: Option<bool>,
    cpu_source: Option<String>,
    last_seen_ms: i64,
    first_seen_ms: i64,
    vm_process_since_ms: Option<i64>,
}

/// Guests written per statement: 20 values each, well under SQLite's 32,766 variables.
const ROWS_PER_STATEMENT: usize = 1000;

impl SqliteDb {
    /// Stores a batch of reports in one transaction (group commit): one fsync for all of them
    /// instead of one each. Each report is stored whole or not at all (a savepoint each): a
    /// duplicate or a refused report leaves the others alone. `plan` decides each guest's
    /// sample from the running totals stored before (`ingest::samples::sample_spans`); it is
    /// called inside the transaction, so that what it was given is what the report follows, a
    /// second report of the same host in the batch seeing the first.
    ///
    /// The outer error is the batch's: nothing of it was written (the commit failed, or the
    /// database did). The inner ones are each report's.
    pub async fn store_reports(
        &self,
        batch: &[ReportToStore<'_>],
        plan: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<Vec<StoreResult<StoreOutcome>>> {
        // IMMEDIATE takes the write lock up front, so two copies of one report arriving at once
        // queue behind each other and the second sees the first instead of failing.
        let mut tx = self.begin_write().await?;
        let mut outcomes = Vec::with_capacity(batch.len());
        for item in batch {
            sqlx::query("SAVEPOINT report").execute(&mut *tx).await?;
            let outcome = store_one(&mut tx, item, &plan).await;
            let keep = matches!(outcome, Ok(StoreOutcome::Stored { .. }));
            if !keep {
                // A failed ROLLBACK TO means SQLite ended the whole transaction itself (a full
                // disk can): the batch fails, and the connection is closed, not pooled.
                sqlx::query("ROLLBACK TO report").execute(&mut *tx).await?;
            }
            sqlx::query("RELEASE report").execute(&mut *tx).await?;
            outcomes.push(outcome);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// Stores one report in a transaction of its own: [`SqliteDb::store_reports`] with a batch of one.
    pub async fn store_report(
        &self,
        report: &ValidReport,
        token_id: TokenId,
        received_ms: i64,
        plan: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<StoreOutcome> {
        let batch = [ReportToStore {
            report,
            token_id,
            received_ms,
        }];
        self.store_reports(&batch, plan)
            .await?
            .pop()
            .unwrap_or_else(|| Err(StoreError::Corrupt("a batch of one stored nothing".into())))
    }
}

/// Stores one report inside the batch's transaction (see [`SqliteDb::store_reports`]).
async fn store_one(
    tx: &mut WriteTx,
    item: &ReportToStore<'_>,
    plan: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<StoreOutcome> {
    let (report, token_id, now_ms) = (item.report, item.token_id, item.received_ms);
    let bound_host: Option<String> =
        sqlx::query_scalar("SELECT host_name FROM tokens WHERE id = ?")
            .bind(token_id)
            .fetch_one(&mut **tx)
            .await?;
    match bound_host {
        Some(bound) if bound != report.host.name => {
            return Err(StoreError::Refused(format!(
                "this agent token reports for host {bound:?}, not {:?}; give each host its own token",
                report.host.name
            )));
        }
        Some(_) => {}
        // A token made without --host takes the host it first reports for, unless another
        // token has it: one that reported for it (revoked or not) or one an admin made for
        // it. Only an admin hands a host to another token, by making it with --host.
        None => {
            let taken: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM tokens
                                WHERE role = 'agent' AND host_name = ?1 AND id != ?2)
                     OR EXISTS (SELECT 1 FROM hosts WHERE name = ?1)",
            )
            .bind(&report.host.name)
            .bind(token_id)
            .fetch_one(&mut **tx)
            .await?;
            if taken {
                return Err(StoreError::Refused(format!(
                    "host {0:?} reports with another agent token; to give it this one, an admin makes a token bound to it (tickscope-server token add NAME --role agent --host {0}, or on the settings page)",
                    report.host.name
                )));
            }
        }
    }
    // A report is a repeat only of one for the same host: another host's token cannot have
    // this host's reports taken for duplicates.
    let seen: Option<i64> = sqlx::query_scalar(
        "SELECT r.id FROM hosts h CROSS JOIN reports r ON r.host_id = h.id
         WHERE h.name = ? AND r.agent_id = ? AND r.run_id = ? AND r.seq = ?",
    )
    .bind(&report.host.name)
    .bind(&report.agent_id)
    .bind(&report.run_id)
    .bind(report.seq)
    .fetch_optional(&mut **tx)
    .await?;
    if seen.is_some() {
        return Ok(StoreOutcome::Duplicate);
    }

    let host = &report.host;
    let (host_id, host_reports): (HostId, i64) = sqlx::query_as(
        "INSERT INTO hosts (name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
            last_report_ms, agent_dropped_reports, blind_spots_json, reports_stored)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
         ON CONFLICT (name) DO UPDATE SET
            blind_spots_json = excluded.blind_spots_json,
            cpus = excluded.cpus, kernel = excluded.kernel,
            agent_version = excluded.agent_version, kvm_halt_poll_ns = excluded.kvm_halt_poll_ns,
            last_report_ms = MAX(last_report_ms, excluded.last_report_ms),
            agent_dropped_reports = MAX(agent_dropped_reports, excluded.agent_dropped_reports),
            reports_stored = reports_stored + 1
         RETURNING id, reports_stored",
    )
    .bind(&host.name)
    .bind(host.cpus)
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
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
         FROM guests WHERE host_id = ? AND process_key IS NOT NULL",
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
    let spans = plan(report, &previous);
    if spans.len() != report.guests.len() {
        return Err(StoreError::Corrupt(format!(
            "{} samples planned for {} guests",
            spans.len(),
            report.guests.len()
        )));
    }

    let mut stored = Vec::with_capacity(report.guests.len());
    // A few statements per report, not a few per guest: each statement is a round trip to
    // SQLite's worker thread, and that, not SQLite, is most of what ingest costs.
    for (guests, spans) in report
        .guests
        .chunks(ROWS_PER_STATEMENT)
        .zip(spans.chunks(ROWS_PER_STATEMENT))
    {
        let mut upsert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO guests (host_id, hypervisor, identity, name, uuid, management, vcpus, pid,
                boot_args, uses_kvm, cpu_source, first_seen_ms, last_seen_ms, process_key, cpu_s_total,
                wakeups_total, totals_at_ms, vm_process, vm_process_since_ms, last_report_n) ",
        );
        upsert.push_values(guests, |mut row, guest| {
            let totals = guest.totals.as_ref();
            row.push_bind(host_id)
                .push_bind(guest.hypervisor.as_str())
                .push_bind(&guest.identity)
                .push_bind(&guest.name)
                .push_bind(&guest.uuid)
                .push_bind(&guest.management)
                .push_bind(guest.vcpus)
                .push_bind(guest.pid)
                .push_bind(&guest.boot_args)
                .push_bind(guest.uses_kvm)
                .push_bind(guest.cpu_source)
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
        upsert.push(
            " ON CONFLICT (host_id, hypervisor, identity) DO UPDATE SET
                name = excluded.name, uuid = excluded.uuid, management = excluded.management,
                vcpus = excluded.vcpus, pid = excluded.pid, boot_args = excluded.boot_args,
                uses_kvm = excluded.uses_kvm, cpu_source = excluded.cpu_source,
                last_seen_ms = MAX(last_seen_ms, excluded.last_seen_ms),
                last_report_n = excluded.last_report_n,
                process_key = CASE WHEN {NEWER} THEN excluded.process_key ELSE process_key END,
                cpu_s_total = CASE WHEN {NEWER} THEN excluded.cpu_s_total ELSE cpu_s_total END,
                wakeups_total = CASE WHEN {NEWER} THEN excluded.wakeups_total ELSE wakeups_total END,
                totals_at_ms = CASE WHEN {NEWER} THEN excluded.totals_at_ms ELSE totals_at_ms END,
                vm_process = CASE WHEN {NEWER} THEN excluded.vm_process ELSE vm_process END,
                vm_process_since_ms = CASE
                    WHEN NOT {NEWER} OR vm_process IS NULL OR vm_process IS excluded.vm_process
                        THEN vm_process_since_ms
                    ELSE excluded.vm_process_since_ms END
             RETURNING hypervisor, identity, id, name, uuid, management, vcpus, pid, boot_args,
                uses_kvm, cpu_source, last_seen_ms, first_seen_ms, vm_process_since_ms"
                .replace("{NEWER}", NEWER_TOTALS),
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

        let mut insert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
                host_cpu_s, vcpu_wakeups, wakeups_source) ",
        );
        insert.push_values(
            guests.iter().zip(spans).zip(&guest_ids),
            |mut row, ((guest, span), guest_id)| {
                row.push_bind(*guest_id)
                    .push_bind(report_id)
                    .push_bind(report.end_ms)
                    .push_bind(now_ms)
                    .push_bind(span.length_ms)
                    .push_bind(guest.vcpus)
                    .push_bind(span.host_cpu_s)
                    .push_bind(span.vcpu_wakeups)
                    .push_bind(guest.wakeups_source);
            },
        );
        insert.build().execute(&mut **tx).await?;

        for ((guest, span), row) in guests.iter().zip(spans).zip(upserted) {
            let facts = match &guest.facts {
                Some(facts) => Some(super::facts::record_facts(tx, row.id, facts, now_ms).await?),
                None => None,
            };
            stored.push(StoredGuest {
                sample: IntervalRow {
                    guest_id: row.id,
                    received_ms: now_ms,
                    length_ms: span.length_ms,
                    vcpus: guest.vcpus,
                    host_cpu_s: span.host_cpu_s,
                    vcpu_wakeups: span.vcpu_wakeups,
                    from_vcpu_threads: guest.wakeups_source == WakeupsSource::VcpuThreads.as_str(),
                },
                first_seen_ms: row.first_seen_ms,
                row: GuestRow {
                    id: row.id,
                    identity: guest.identity.clone(),
                    host_id,
                    host_name: host.name.clone(),
                    host_halt_poll_ns: host.kvm_halt_poll_ns,
                    hypervisor: guest.hypervisor,
                    name: row.name,
                    uuid: row.uuid,
                    management: row.management,
                    vcpus: row.vcpus,
                    pid: row.pid,
                    boot_args: row.boot_args,
                    uses_kvm: row.uses_kvm,
                    cpu_source: row.cpu_source,
                    last_seen_ms: row.last_seen_ms,
                    process_since_ms: row.vm_process_since_ms,
                    last_report_n: host_reports,
                    host_reports,
                },
                facts,
            });
        }
    }

    // The first report binds a token made without --host to its host.
    sqlx::query(
        "UPDATE tokens SET last_used_ms = ?, host_name = COALESCE(host_name, ?) WHERE id = ?",
    )
    .bind(now_ms)
    .bind(&report.host.name)
    .bind(token_id)
    .execute(&mut **tx)
    .await?;
    Ok(StoreOutcome::Stored {
        report_id,
        host_id,
        host_reports,
        guests: stored,
    })
}

impl SqliteDb {
    /// Rows in the reports and samples tables, for checking that refused input stored nothing.
    pub async fn count_reports_and_samples(&self) -> StoreResult<(i64, i64)> {
        sqlx::query_as("SELECT (SELECT COUNT(*) FROM reports), (SELECT COUNT(*) FROM samples)")
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::from)
    }
}

impl SqliteDb {
    /// Hosts whose name does not match a SQL LIKE pattern: the demo refuses to mix its simulated
    /// hosts into a database that real agents report to.
    pub async fn count_hosts_not_like(&self, pattern: &str) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM hosts WHERE name NOT LIKE ?")
                .bind(pattern)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}
