//! The rows a set of reports of distinct hosts writes (see `reports.rs`): their hosts, reports,
//! guests, samples and facts, a few statements a table for all of them. The upserts name the
//! row they update (`g.`, `hosts.`), which PostgreSQL needs to tell it from `excluded`.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{DB, GREATEST, WriteTx, id_list, in_id_list};
use super::facts::FactsToRecord;
use crate::db::error::{StoreError, StoreResult};
use crate::db::reports::{
    PLANNED_EACH_TIME, ReportToStore, StoreOutcome, StoredGuest, UpsertedGuest, stored_halt_poll_s,
    stored_parts,
};
use crate::db::rows_at_once::runs;
use crate::domain::{HostId, ReportId};
use crate::ingest::process_totals::{SampleSpan, StoredTotals};
use crate::ingest::samples::PreviousTotals;
use crate::ingest::{ValidGuest, ValidReport};

/// Rows written per statement at most (guests, samples, hosts, reports, tokens), in runs of the
/// few lengths `rows_at_once` allows: the guests' upsert, the widest, binds 24 values a row,
/// well under SQLite's 32,766 parameters and PostgreSQL's 65,535.
pub(super) const ROWS_PER_STATEMENT: usize = 512;

/// When a report's totals replace the stored ones (`g` the guest's row as stored): a report that
/// ends before the stored totals were read (it arrived late) must not set them back.
const NEWER_TOTALS: &str = "(excluded.totals_at_ms IS NULL OR g.totals_at_ms IS NULL
    OR excluded.totals_at_ms >= g.totals_at_ms)";

/// One guest of a set of reports, with its report and the sample ingest decided.
struct GuestToStore<'r> {
    item: &'r ReportToStore<'r>,
    host_id: HostId,
    host_reports: i64,
    report_id: ReportId,
    guest: &'r ValidGuest,
    span: &'r SampleSpan,
}

/// Stores reports of distinct hosts (each with whether its token takes its host): their
/// hosts, reports, guests, samples and facts, a few statements a table for all of them.
pub(super) async fn store_reports_of_hosts(
    tx: &mut WriteTx,
    items: &[(&ReportToStore<'_>, bool)],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<Vec<StoreOutcome>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let host_ids = upsert_hosts(tx, items).await?;
    let report_ids = insert_reports(tx, items, &host_ids).await?;
    let previous = previous_totals(tx, &host_ids).await?;

    // What each guest's sample stores is ingest's decision, from the totals read above in
    // this same transaction: a copy of a report arriving meanwhile waits for the lock.
    let no_totals = PreviousTotals::new();
    let mut spans = Vec::with_capacity(items.len());
    for ((item, _), (host_id, _)) in items.iter().zip(&host_ids) {
        let report = item.report;
        let planned = decide_samples(report, previous.get(host_id).unwrap_or(&no_totals));
        if planned.len() != report.guests.len() {
            return Err(StoreError::Corrupt(format!(
                "{} samples planned for {} guests",
                planned.len(),
                report.guests.len()
            )));
        }
        spans.push(planned);
    }
    let mut guests: Vec<GuestToStore<'_>> = Vec::new();
    for ((((item, _), &(host_id, host_reports)), &report_id), spans) in
        items.iter().zip(&host_ids).zip(&report_ids).zip(&spans)
    {
        for (guest, span) in item.report.guests.iter().zip(spans) {
            guests.push(GuestToStore {
                item,
                host_id,
                host_reports,
                report_id,
                guest,
                span,
            });
        }
    }

    let mut rows: Vec<UpsertedGuest> = Vec::with_capacity(guests.len());
    for chunk in runs(&guests, ROWS_PER_STATEMENT) {
        let upserted = upsert_guests(tx, chunk).await?;
        insert_samples(tx, chunk, &upserted).await?;
        rows.extend(upserted);
    }
    // The facts some guests brought, for all of them at once.
    let facts_items: Vec<FactsToRecord<'_>> = guests
        .iter()
        .zip(&rows)
        .filter_map(|(g, row)| {
            Some(FactsToRecord {
                guest_id: row.id,
                facts: g.guest.facts.as_ref()?,
                now_ms: g.item.received_ms,
            })
        })
        .collect();
    let mut facts = super::facts::record_facts(tx, &facts_items)
        .await?
        .into_iter();

    // The first report binds a token made without --host to its host (when it was last used
    // is written once a batch, by the caller).
    for (item, _) in items.iter().filter(|(_, unbound)| *unbound) {
        sqlx::query("UPDATE tokens SET host_name = COALESCE(host_name, $1) WHERE id = $2")
            .bind(&item.report.host.name)
            .bind(item.token_id)
            .execute(&mut **tx)
            .await?;
    }

    // The guests come in their reports' order, report after report.
    let mut stored = guests.into_iter().zip(rows);
    let mut outcomes = Vec::with_capacity(items.len());
    for (((item, _), &(host_id, host_reports)), &report_id) in
        items.iter().zip(&host_ids).zip(&report_ids)
    {
        let report = item.report;
        let stored_guests = stored
            .by_ref()
            .take(report.guests.len())
            .map(|(g, row)| {
                let facts = g.guest.facts.as_ref().and_then(|_| facts.next());
                StoredGuest::assemble(
                    report,
                    host_id,
                    host_reports,
                    g.guest,
                    g.span,
                    row,
                    item.received_ms,
                    facts,
                )
            })
            .collect();
        outcomes.push(StoreOutcome::Stored {
            report_id,
            host_id,
            host_reports,
            guests: stored_guests,
        });
    }
    Ok(outcomes)
}

/// Upserts the hosts of `items` (distinct): each one's id and count of stored reports, this
/// one included, in the order of `items`.
async fn upsert_hosts(
    tx: &mut WriteTx,
    items: &[(&ReportToStore<'_>, bool)],
) -> StoreResult<Vec<(HostId, i64)>> {
    let mut by_name: HashMap<String, (HostId, i64)> = HashMap::with_capacity(items.len());
    for chunk in runs(items, ROWS_PER_STATEMENT) {
        let mut upsert = QueryBuilder::<DB>::new(
            "INSERT INTO hosts (name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                last_report_ms, agent_dropped_reports, blind_spots_json, reports_stored) ",
        );
        upsert.push_values(chunk, |mut row, (item, _)| {
            let (report, host) = (item.report, &item.report.host);
            row.push_bind(&host.name)
                .push_bind(i64::from(host.cpus))
                .push_bind(&host.kernel)
                .push_bind(&report.agent_version)
                .push_bind(host.kvm_halt_poll_ns)
                .push_bind(item.received_ms)
                .push_bind(item.received_ms)
                .push_bind(report.dropped_reports)
                .push_bind(&host.blind_spots_json)
                .push_bind(1_i64);
        });
        upsert.push(format!(
            " ON CONFLICT (name) DO UPDATE SET
                blind_spots_json = excluded.blind_spots_json,
                cpus = excluded.cpus, kernel = excluded.kernel,
                agent_version = excluded.agent_version, kvm_halt_poll_ns = excluded.kvm_halt_poll_ns,
                last_report_ms = {GREATEST}(hosts.last_report_ms, excluded.last_report_ms),
                agent_dropped_reports =
                    {GREATEST}(hosts.agent_dropped_reports, excluded.agent_dropped_reports),
                reports_stored = hosts.reports_stored + 1
             RETURNING name, id, reports_stored"
        ));
        for (name, id, reports_stored) in upsert
            .build_query_as::<(String, HostId, i64)>()
            .fetch_all(&mut **tx)
            .await?
        {
            by_name.insert(name, (id, reports_stored));
        }
    }
    items
        .iter()
        .map(|(item, _)| {
            let name = &item.report.host.name;
            by_name
                .get(name)
                .copied()
                .ok_or_else(|| StoreError::Corrupt(format!("no id stored for host {name:?}")))
        })
        .collect()
}

/// Inserts the reports of `items` (of distinct hosts), each of its host in `host_ids`: their
/// ids, in the order of `items`.
async fn insert_reports(
    tx: &mut WriteTx,
    items: &[(&ReportToStore<'_>, bool)],
    host_ids: &[(HostId, i64)],
) -> StoreResult<Vec<ReportId>> {
    let mut by_host: HashMap<HostId, ReportId> = HashMap::with_capacity(items.len());
    // The two lists are as long as each other, so they are cut alike.
    for (chunk, hosts) in runs(items, ROWS_PER_STATEMENT).zip(runs(host_ids, ROWS_PER_STATEMENT)) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms, length_ms, received_ms) ",
        );
        insert.push_values(
            chunk.iter().zip(hosts),
            |mut row, ((item, _), (host_id, _))| {
                let report = item.report;
                row.push_bind(*host_id)
                    .push_bind(item.token_id)
                    .push_bind(&report.agent_id)
                    .push_bind(&report.run_id)
                    .push_bind(report.seq)
                    .push_bind(report.start_ms)
                    .push_bind(report.end_ms)
                    .push_bind(report.length_ms)
                    .push_bind(item.received_ms);
            },
        );
        insert.push(" RETURNING host_id, id");
        by_host.extend(
            insert
                .build_query_as::<(HostId, ReportId)>()
                .fetch_all(&mut **tx)
                .await?,
        );
    }
    items
        .iter()
        .zip(host_ids)
        .map(|((item, _), (host_id, _))| {
            by_host.get(host_id).copied().ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "no report stored for host {:?}",
                    item.report.host.name
                ))
            })
        })
        .collect()
}

/// The running totals of the hosts' guests as of their previous reports, by host, in one
/// statement.
async fn previous_totals(
    tx: &mut WriteTx,
    host_ids: &[(HostId, i64)],
) -> StoreResult<HashMap<HostId, PreviousTotals>> {
    let sql = format!(
        "SELECT host_id, hypervisor, identity, process_key, cpu_s_total, wakeups_total, totals_at_ms
         FROM guests WHERE {} AND process_key IS NOT NULL",
        in_id_list("host_id", 1)
    );
    // Planned for the ids it is given each time (see `PLANNED_EACH_TIME`).
    let rows = sqlx::query_as::<_, (HostId, String, String, String, f64, i64, i64)>(&sql)
        .persistent(PLANNED_EACH_TIME)
        .bind(id_list(host_ids.iter().map(|(id, _)| id.0)))
        .fetch_all(&mut **tx)
        .await?;
    let mut previous: HashMap<HostId, PreviousTotals> = HashMap::new();
    for (host_id, hypervisor, identity, process_key, host_cpu_s, vcpu_wakeups, at_ms) in rows {
        let totals = StoredTotals {
            process_key,
            host_cpu_s,
            vcpu_wakeups,
            at_ms,
        };
        previous
            .entry(host_id)
            .or_default()
            .insert((hypervisor, identity), totals);
    }
    Ok(previous)
}

/// Upserts a run of guests (see `rows_at_once`): their rows as the upsert left them, in order.
async fn upsert_guests(
    tx: &mut WriteTx,
    guests: &[GuestToStore<'_>],
) -> StoreResult<Vec<UpsertedGuest>> {
    // A report names each guest once (ingest makes identities unique), and a set each host
    // once, as PostgreSQL requires of one upsert: it refuses to update a row twice in one
    // statement.
    let mut upsert = QueryBuilder::<DB>::new(
        "INSERT INTO guests AS g (host_id, hypervisor, identity, name, uuid, management, vcpus,
            pid, boot_args, uses_kvm, cpu_source, hyperv, hpet, os_hint, platform, first_seen_ms,
            last_seen_ms, process_key, cpu_s_total, wakeups_total, totals_at_ms, vm_process,
            vm_process_since_ms, last_report_n) ",
    );
    upsert.push_values(guests, |mut row, g| {
        let (guest, now_ms) = (g.guest, g.item.received_ms);
        let totals = guest.totals.as_ref();
        row.push_bind(g.host_id)
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
            .push_bind(totals.map(|_| g.item.report.end_ms))
            .push_bind(&guest.vm_process)
            .push_bind(now_ms)
            .push_bind(g.host_reports);
    });
    // Every SET expression reads the row as it was stored (vm_process_since_ms compares the
    // stored vm_process, not the one set beside it), on PostgreSQL as on SQLite.
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
         RETURNING host_id, hypervisor, identity, id, name, uuid, management, vcpus, pid,
            boot_args, uses_kvm, cpu_source, hyperv, hpet, os_hint, platform, last_seen_ms,
            first_seen_ms, vm_process_since_ms, {TOTALS}"
            .replace("{NEWER}", NEWER_TOTALS)
            .replace("{GREATEST}", GREATEST)
            .replace("{TOTALS}", &super::process_totals::totals_columns("")),
    );
    // RETURNING comes in no promised order: match the rows by guest.
    let mut returned: HashMap<(HostId, String, String), UpsertedGuest> = upsert
        .build_query_as::<UpsertedGuest>()
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .map(|row| {
            (
                (row.host_id, row.hypervisor.clone(), row.identity.clone()),
                row,
            )
        })
        .collect();
    guests
        .iter()
        .map(|g| {
            let key = (
                g.host_id,
                g.guest.hypervisor.as_str().to_string(),
                g.guest.identity.clone(),
            );
            returned.remove(&key).ok_or_else(|| {
                StoreError::Corrupt(format!("no id stored for guest {:?}", g.guest.identity))
            })
        })
        .collect()
}

/// Inserts the samples of `guests`, each guest's row in `rows` (the same order).
async fn insert_samples(
    tx: &mut WriteTx,
    guests: &[GuestToStore<'_>],
    rows: &[UpsertedGuest],
) -> StoreResult<()> {
    let mut insert = QueryBuilder::<DB>::new(
        "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
            host_cpu_s, vcpu_wakeups, wakeups_source, vcpu_cpu_s, iothread_cpu_s,
            vhost_cpu_s, halt_poll_s) ",
    );
    insert.push_values(guests.iter().zip(rows), |mut row, (g, stored)| {
        let (guest, span) = (g.guest, g.span);
        row.push_bind(stored.id)
            .push_bind(g.report_id)
            .push_bind(g.item.report.end_ms)
            .push_bind(g.item.received_ms)
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
    });
    insert.build().execute(&mut **tx).await?;
    Ok(())
}
