//! Reports and their samples: one transaction per batch, and in it a savepoint per set of
//! reports of distinct hosts and tokens (usually the whole batch), each set written in a few
//! statements a table whatever its number of reports and guests. A set that fails is rolled
//! back to its savepoint and its reports are stored one by one, so that a report that fails
//! leaves the others stored (PostgreSQL refuses every statement of a transaction once one
//! failed; SQLite would carry on). The upserts name the row they update (`g.`, `hosts.`), which
//! PostgreSQL needs to tell it from `excluded`; unsigned counts are bound as 64-bit integers.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{
    DB, GREATEST, JOIN_IN_ORDER, NAME_NOT_LIKE_PARAM_1, Store, WriteTx, id_list, in_id_list,
};
use super::facts::FactsToRecord;
use crate::db::error::{StoreError, StoreResult};
use crate::db::reports::{
    PLANNED_EACH_TIME, ReportToStore, StoreOutcome, StoredGuest, UpsertedGuest, sets_apart,
    stored_halt_poll_s, stored_parts,
};
use crate::domain::{HostId, ReportId, TokenId};
use crate::ingest::host_binding::{HostClaim, may_report};
use crate::ingest::process_totals::{SampleSpan, StoredTotals};
use crate::ingest::samples::PreviousTotals;
use crate::ingest::{ValidGuest, ValidReport};

/// When a report's totals replace the stored ones (`g` the guest's row as stored): a report that
/// ends before the stored totals were read (it arrived late) must not set them back.
const NEWER_TOTALS: &str = "(excluded.totals_at_ms IS NULL OR g.totals_at_ms IS NULL
    OR excluded.totals_at_ms >= g.totals_at_ms)";

/// Rows written per statement (guests, samples, hosts, reports, tokens): the guests' upsert, the
/// widest, binds 24 values a row, well under SQLite's 32,766 parameters and PostgreSQL's 65,535.
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
        let mut outcomes: Vec<Option<StoreResult<StoreOutcome>>> =
            (0..batch.len()).map(|_| None).collect();
        for set in sets_apart(batch) {
            // A set that fails (one report's statement failed) wrote nothing: each of its
            // reports is then stored alone, so that the failure is that report's only.
            let alone: Vec<Vec<usize>> = if set.len() == 1 {
                vec![set]
            } else {
                match store_in_savepoint(&mut tx, batch, &set, &decide_samples).await? {
                    Ok(stored) => {
                        for (i, outcome) in set.into_iter().zip(stored) {
                            outcomes[i] = Some(outcome);
                        }
                        continue;
                    }
                    Err(_) => set.into_iter().map(|i| vec![i]).collect(),
                }
            };
            for one in alone {
                let outcome =
                    match store_in_savepoint(&mut tx, batch, &one, &decide_samples).await? {
                        Ok(mut stored) => stored.pop().unwrap_or_else(|| {
                            Err(StoreError::Corrupt(
                                "a report stored alone came to nothing".into(),
                            ))
                        }),
                        Err(e) => Err(e),
                    };
                outcomes[one[0]] = Some(outcome);
            }
        }
        let outcomes: Vec<StoreResult<StoreOutcome>> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Err(StoreError::Corrupt("a report was left out".into()))))
            .collect();
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

/// Stores the reports `set` names inside a savepoint. The outer error is the transaction's
/// (the savepoint could not be rolled back to); the inner one says the set failed and wrote
/// nothing; else each report's outcome, in the set's order.
async fn store_in_savepoint(
    tx: &mut WriteTx,
    batch: &[ReportToStore<'_>],
    set: &[usize],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<StoreResult<Vec<StoreResult<StoreOutcome>>>> {
    // Texts without arguments: PostgreSQL's simple protocol, which takes two statements.
    sqlx::Executor::execute(&mut **tx, "SAVEPOINT reports").await?;
    let items: Vec<&ReportToStore<'_>> = set.iter().map(|&i| &batch[i]).collect();
    let stored = store_set(tx, &items, decide_samples).await;
    let end = if stored.is_ok() {
        "RELEASE SAVEPOINT reports"
    } else {
        // Also what lets the batch go on after a statement failed: PostgreSQL refuses every
        // statement of an aborted transaction until it is rolled back to a savepoint.
        "ROLLBACK TO SAVEPOINT reports; RELEASE SAVEPOINT reports"
    };
    sqlx::Executor::execute(&mut **tx, end).await?;
    Ok(stored)
}

/// What the token and the repeat check say of one report of a set.
enum Verdict {
    Refused(String),
    Duplicate,
    /// To be stored; `unbound`: its token has no host yet and takes this one.
    Store {
        unbound: bool,
    },
}

/// Stores a set of reports of distinct hosts and tokens (see [`sets_apart`]) inside the
/// batch's transaction, a few statements a table for the whole set: the outcome of each, in
/// order. A refused or repeated report writes nothing; a failed statement fails the set.
async fn store_set(
    tx: &mut WriteTx,
    items: &[&ReportToStore<'_>],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<Vec<StoreResult<StoreOutcome>>> {
    let verdicts = judge(tx, items).await?;
    let to_store: Vec<(&ReportToStore<'_>, bool)> = items
        .iter()
        .zip(&verdicts)
        .filter_map(|(item, verdict)| match verdict {
            Verdict::Store { unbound } => Some((*item, *unbound)),
            _ => None,
        })
        .collect();
    let mut stored = store_reports_of_hosts(tx, &to_store, decide_samples)
        .await?
        .into_iter();
    Ok(verdicts
        .into_iter()
        .map(|verdict| match verdict {
            Verdict::Refused(why) => Err(StoreError::Refused(why)),
            Verdict::Duplicate => Ok(StoreOutcome::Duplicate),
            Verdict::Store { .. } => stored
                .next()
                .ok_or_else(|| StoreError::Corrupt("a stored report came to nothing".into())),
        })
        .collect())
}

/// Which host each report's token may report for (ingest's decision, from what is read here),
/// and whether the report is a repeat: one statement for the set. A report is a repeat only of
/// one for the same host: another host's token cannot have this host's reports taken for
/// duplicates.
async fn judge(tx: &mut WriteTx, items: &[&ReportToStore<'_>]) -> StoreResult<Vec<Verdict>> {
    let mut query = QueryBuilder::<DB>::new(format!(
        "SELECT v.column1, t.host_name,
                (SELECT r.id FROM hosts h {JOIN_IN_ORDER} reports r ON r.host_id = h.id
                 WHERE h.name = v.column3 AND r.agent_id = v.column4 AND r.run_id = v.column5
                   AND r.seq = v.column6)
         FROM ("
    ));
    query.push_values(items.iter().enumerate(), |mut row, (n, item)| {
        row.push_bind(n as i64)
            .push_bind(item.token_id)
            .push_bind(&item.report.host.name)
            .push_bind(&item.report.agent_id)
            .push_bind(&item.report.run_id)
            .push_bind(item.report.seq);
    });
    query.push(") AS v JOIN tokens t ON t.id = v.column2");
    let mut found: Vec<Option<(Option<String>, Option<ReportId>)>> = vec![None; items.len()];
    for (n, bound_host, seen) in query
        .build_query_as::<(i64, Option<String>, Option<ReportId>)>()
        .fetch_all(&mut **tx)
        .await?
    {
        if let Some(slot) = usize::try_from(n).ok().and_then(|n| found.get_mut(n)) {
            *slot = Some((bound_host, seen));
        }
    }
    let mut verdicts = Vec::with_capacity(items.len());
    for (item, found) in items.iter().zip(found) {
        let (bound_host, seen) =
            found.ok_or_else(|| StoreError::Corrupt("no row for the report's token".into()))?;
        let host = &item.report.host.name;
        let unbound = bound_host.is_none();
        let claim = match bound_host {
            Some(bound) => HostClaim::Bound(bound),
            // A token's first report: rare, and a statement of its own.
            None => HostClaim::Unbound {
                host_taken: sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM tokens
                                    WHERE role = 'agent' AND host_name = $1 AND id <> $2)
                         OR EXISTS (SELECT 1 FROM hosts WHERE name = $1)",
                )
                .bind(host)
                .bind(item.token_id)
                .fetch_one(&mut **tx)
                .await?,
            },
        };
        verdicts.push(match may_report(&claim, host) {
            Err(why) => Verdict::Refused(why),
            Ok(()) if seen.is_some() => Verdict::Duplicate,
            Ok(()) => Verdict::Store { unbound },
        });
    }
    Ok(verdicts)
}

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
async fn store_reports_of_hosts(
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
    for (((item, _), &(host_id, host_reports)), spans) in items.iter().zip(&host_ids).zip(&spans) {
        let report_id = *report_ids.get(&host_id).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "no report stored for host {:?}",
                item.report.host.name
            ))
        })?;
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
    for chunk in guests.chunks(ROWS_PER_STATEMENT) {
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
    for (((item, _), &(host_id, host_reports)), report_id) in items
        .iter()
        .zip(&host_ids)
        .map(|pair| (pair, report_ids[&pair.1.0]))
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
    for chunk in items.chunks(ROWS_PER_STATEMENT) {
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

/// Inserts the reports of `items`, each of its host in `host_ids`: their ids, by host.
async fn insert_reports(
    tx: &mut WriteTx,
    items: &[(&ReportToStore<'_>, bool)],
    host_ids: &[(HostId, i64)],
) -> StoreResult<HashMap<HostId, ReportId>> {
    let mut report_ids = HashMap::with_capacity(items.len());
    for (chunk, hosts) in items
        .chunks(ROWS_PER_STATEMENT)
        .zip(host_ids.chunks(ROWS_PER_STATEMENT))
    {
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
        report_ids.extend(
            insert
                .build_query_as::<(HostId, ReportId)>()
                .fetch_all(&mut **tx)
                .await?,
        );
    }
    Ok(report_ids)
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

/// Upserts up to [`ROWS_PER_STATEMENT`] guests: their rows as the upsert left them, in order.
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
