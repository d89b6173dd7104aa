//! Reports and their samples: one transaction per batch and a savepoint per report. A report
//! that fails is rolled back to its savepoint before the next one runs (PostgreSQL refuses
//! every statement of a transaction once one failed; SQLite would carry on). The upserts name
//! the row they update (`g.`, `hosts.`), which PostgreSQL needs to tell it from `excluded`;
//! unsigned counts are bound as 64-bit integers.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{
    DB, GREATEST, JOIN_IN_ORDER, NAME_NOT_LIKE_PARAM_1, Store, WriteTx, id_list, in_id_list,
};
use super::facts::FactsToStore;
use crate::db::error::{StoreError, StoreResult};
use crate::db::facts::StoredFacts;
use crate::db::reports::{
    ROWS_PER_STATEMENT, ReportToStore, StoreOutcome, StoredGuest, UpsertedGuest, rounds,
};
use crate::domain::{HostId, ReportId, TokenId};
use crate::ingest::ValidReport;
use crate::ingest::host_binding::{HostClaim, may_report};
use crate::ingest::process_totals::{SampleSpan, StoredTotals};
use crate::ingest::samples::PreviousTotals;

/// When a report's totals replace the stored ones (`g` the guest's row as stored): a report that
/// ends before the stored totals were read (it arrived late) must not set them back.
const NEWER_TOTALS: &str = "(excluded.totals_at_ms IS NULL OR g.totals_at_ms IS NULL
    OR excluded.totals_at_ms >= g.totals_at_ms)";

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
            batch.iter().map(|_| None).collect();
        let keys = batch
            .iter()
            .map(|item| (item.report.host.name.as_str(), item.token_id));
        for round in rounds(keys) {
            let items: Vec<&ReportToStore<'_>> = round.iter().map(|&n| &batch[n]).collect();
            let results = match store_saved(&mut tx, &items, &decide_samples).await? {
                Ok(results) => results,
                Err(e) if items.len() == 1 => vec![Err(e)],
                // A statement of the round failed: each of its reports is stored again on its
                // own, so that the one that fails fails alone.
                Err(_) => {
                    let mut results = Vec::with_capacity(items.len());
                    for item in &items {
                        results.push(
                            match store_saved(&mut tx, &[item], &decide_samples).await? {
                                Ok(mut one) => one.pop().unwrap_or_else(|| {
                                    Err(StoreError::Corrupt("a report stored to nothing".into()))
                                }),
                                Err(e) => Err(e),
                            },
                        );
                    }
                    results
                }
            };
            for (n, result) in round.into_iter().zip(results) {
                outcomes[n] = Some(result);
            }
        }
        let outcomes: Vec<StoreResult<StoreOutcome>> = outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Err(StoreError::Corrupt("a report left out".into()))))
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

/// Stores `items` (one round) under a savepoint. `Ok(Err(_))`: a statement failed, and
/// nothing of the round was kept. `Err(_)`: even the rollback failed (the connection is
/// lost), which fails the batch; dropping its transaction rolls it all back. PostgreSQL
/// refuses every statement of a transaction once one failed, until it is rolled back to a
/// savepoint (SQLite would carry on).
async fn store_saved(
    tx: &mut WriteTx,
    items: &[&ReportToStore<'_>],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<StoreResult<Vec<StoreResult<StoreOutcome>>>> {
    sqlx::query("SAVEPOINT round").execute(&mut **tx).await?;
    let stored = store_round(tx, items, decide_samples).await;
    if stored.is_err() {
        sqlx::query("ROLLBACK TO SAVEPOINT round")
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query("RELEASE SAVEPOINT round")
        .execute(&mut **tx)
        .await?;
    Ok(stored)
}

/// A report of a round that is to be written, and what its first statements gave it.
struct Writing<'a> {
    item: &'a ReportToStore<'a>,
    /// Its position in the round.
    n: usize,
    /// The token was bound to no host yet: this report binds it.
    unbound: bool,
    host_id: HostId,
    host_reports: i64,
    report_id: ReportId,
    spans: Vec<SampleSpan>,
}

/// Stores one round (see [`rounds`](crate::db::reports::rounds)): the same few statements
/// however many reports and guests it holds (split only past [`ROWS_PER_STATEMENT`] rows).
/// Says what came of each report, in the round's order; an error fails the whole round.
async fn store_round(
    tx: &mut WriteTx,
    items: &[&ReportToStore<'_>],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<Vec<StoreResult<StoreOutcome>>> {
    let mut outcomes: Vec<Option<StoreResult<StoreOutcome>>> = items.iter().map(|_| None).collect();
    let mut writing: Vec<Writing<'_>> = Vec::with_capacity(items.len());
    for (n, (bound_host, seen)) in claims(tx, items).await?.into_iter().enumerate() {
        let item = items[n];
        let report = item.report;
        // Which host the token may report for is ingest's decision, from what is read here.
        let Some(bound_host) = bound_host else {
            // The token is gone (revoked since its request was let in).
            outcomes[n] = Some(Err(StoreError::from(sqlx::Error::RowNotFound)));
            continue;
        };
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
                .bind(item.token_id)
                .fetch_one(&mut **tx)
                .await?,
            },
        };
        if let Err(refused) = may_report(&claim, &report.host.name) {
            outcomes[n] = Some(Err(StoreError::Refused(refused)));
        } else if seen.is_some() {
            outcomes[n] = Some(Ok(StoreOutcome::Duplicate));
        } else {
            writing.push(Writing {
                item,
                n,
                unbound,
                host_id: HostId(0),
                host_reports: 0,
                report_id: ReportId(0),
                spans: Vec::new(),
            });
        }
    }
    if !writing.is_empty() {
        let stored = write_round(tx, &mut writing, decide_samples).await?;
        for (w, guests) in writing.iter().zip(stored) {
            outcomes[w.n] = Some(Ok(StoreOutcome::Stored {
                report_id: w.report_id,
                host_id: w.host_id,
                host_reports: w.host_reports,
                guests,
            }));
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| StoreError::Corrupt("a report of a round left out".into())))
        .collect()
}

/// For each report of a round, in its order: the host its token is bound to (`None`: the token
/// is gone; `Some(None)`: bound to none yet), and the report stored before under the same
/// (host, agent, run, seq), if any. A report is a repeat only of one for the same host: another
/// host's token cannot have this host's reports taken for duplicates.
async fn claims(
    tx: &mut WriteTx,
    items: &[&ReportToStore<'_>],
) -> StoreResult<Vec<(Option<Option<String>>, Option<ReportId>)>> {
    // VALUES names its columns column1, column2, ... on both databases.
    let mut query = QueryBuilder::<DB>::new(format!(
        "SELECT v.column1, t.host_name,
                (SELECT r.id FROM hosts h {JOIN_IN_ORDER} reports r ON r.host_id = h.id
                 WHERE h.name = v.column3 AND r.agent_id = v.column4 AND r.run_id = v.column5
                   AND r.seq = v.column6)
         FROM ("
    ));
    query.push_values(items.iter().enumerate(), |mut row, (n, item)| {
        let report = item.report;
        row.push_bind(n as i64)
            .push_bind(item.token_id)
            .push_bind(&report.host.name)
            .push_bind(&report.agent_id)
            .push_bind(&report.run_id)
            .push_bind(report.seq);
    });
    query.push(") AS v JOIN tokens t ON t.id = v.column2");
    let mut claims: Vec<(Option<Option<String>>, Option<ReportId>)> =
        items.iter().map(|_| (None, None)).collect();
    let rows: Vec<(i64, Option<String>, Option<ReportId>)> =
        query.build_query_as().fetch_all(&mut **tx).await?;
    for (n, bound_host, seen) in rows {
        let claim = usize::try_from(n)
            .ok()
            .and_then(|n| claims.get_mut(n))
            .ok_or_else(|| StoreError::Corrupt(format!("a claim for report {n} of a round")))?;
        *claim = (Some(bound_host), seen);
    }
    Ok(claims)
}

/// Writes the reports of a round that are to be written: their hosts, the reports, their
/// guests, samples and facts, a statement each for all of them. Fills in each report's host,
/// count and id, and says what was stored for each report's guests.
async fn write_round(
    tx: &mut WriteTx,
    writing: &mut [Writing<'_>],
    decide_samples: &impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
) -> StoreResult<Vec<Vec<StoredGuest>>> {
    // The hosts: a round names each once, so one upsert takes them all.
    let mut hosts = QueryBuilder::<DB>::new(
        "INSERT INTO hosts (name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
            last_report_ms, agent_dropped_reports, blind_spots_json, reports_stored) ",
    );
    hosts.push_values(writing.iter(), |mut row, w| {
        let (report, now_ms) = (w.item.report, w.item.received_ms);
        let host = &report.host;
        row.push_bind(&host.name)
            .push_bind(i64::from(host.cpus))
            .push_bind(&host.kernel)
            .push_bind(&report.agent_version)
            .push_bind(host.kvm_halt_poll_ns)
            .push_bind(now_ms)
            .push_bind(now_ms)
            .push_bind(report.dropped_reports)
            .push_bind(&host.blind_spots_json)
            .push("1");
    });
    hosts.push(format!(
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
    // RETURNING comes in no promised order: each row is matched by its key.
    let mut by_name: HashMap<String, (HostId, i64)> = hosts
        .build_query_as::<(String, HostId, i64)>()
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .map(|(name, id, count)| (name, (id, count)))
        .collect();
    for w in writing.iter_mut() {
        (w.host_id, w.host_reports) = by_name
            .remove(&w.item.report.host.name)
            .ok_or_else(|| StoreError::Corrupt("no id stored for a host".into()))?;
    }

    let mut reports = QueryBuilder::<DB>::new(
        "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
            length_ms, received_ms) ",
    );
    reports.push_values(writing.iter(), |mut row, w| {
        let report = w.item.report;
        row.push_bind(w.host_id)
            .push_bind(w.item.token_id)
            .push_bind(&report.agent_id)
            .push_bind(&report.run_id)
            .push_bind(report.seq)
            .push_bind(report.start_ms)
            .push_bind(report.end_ms)
            .push_bind(report.length_ms)
            .push_bind(w.item.received_ms);
    });
    reports.push(" RETURNING host_id, id");
    let mut by_host: HashMap<HostId, ReportId> = reports
        .build_query_as::<(HostId, ReportId)>()
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .collect();
    for w in writing.iter_mut() {
        w.report_id = by_host
            .remove(&w.host_id)
            .ok_or_else(|| StoreError::Corrupt("no id stored for a report".into()))?;
    }

    // The hosts' guests' running totals as of their previous reports, read once. What each
    // guest's sample stores is ingest's decision, from these totals read in this same
    // transaction: a copy of the report arriving meanwhile waits for the lock.
    let mut previous = previous_totals(tx, writing.iter().map(|w| w.host_id)).await?;
    for w in writing.iter_mut() {
        let report = w.item.report;
        let totals = previous.remove(&w.host_id).unwrap_or_default();
        w.spans = decide_samples(report, &totals);
        if w.spans.len() != report.guests.len() {
            return Err(StoreError::Corrupt(format!(
                "{} samples planned for {} guests",
                w.spans.len(),
                report.guests.len()
            )));
        }
    }

    // Every guest of the round, as (report, guest) positions.
    let guests: Vec<(usize, usize)> = writing
        .iter()
        .enumerate()
        .flat_map(|(r, w)| (0..w.item.report.guests.len()).map(move |g| (r, g)))
        .collect();
    let mut upserted: Vec<Vec<Option<UpsertedGuest>>> = writing
        .iter()
        .map(|w| w.item.report.guests.iter().map(|_| None).collect())
        .collect();
    for chunk in guests.chunks(ROWS_PER_STATEMENT) {
        let rows = upsert_guests(tx, writing, chunk).await?;
        let mut by_key: HashMap<(HostId, String, String), UpsertedGuest> = rows
            .into_iter()
            .map(|row| {
                (
                    (row.host_id, row.hypervisor.clone(), row.identity.clone()),
                    row,
                )
            })
            .collect();
        for &(r, g) in chunk {
            let guest = &writing[r].item.report.guests[g];
            let key = (
                writing[r].host_id,
                guest.hypervisor.as_str().to_string(),
                guest.identity.clone(),
            );
            upserted[r][g] = Some(by_key.remove(&key).ok_or_else(|| {
                StoreError::Corrupt(format!("no id stored for guest {:?}", guest.identity))
            })?);
        }
        insert_samples(tx, writing, chunk, &upserted).await?;
    }

    // The facts of every guest that sent them, in a few statements for the round.
    let with_facts: Vec<(usize, usize)> = guests
        .iter()
        .copied()
        .filter(|&(r, g)| writing[r].item.report.guests[g].facts.is_some())
        .collect();
    let facts: Vec<FactsToStore<'_>> = with_facts
        .iter()
        .map(|&(r, g)| {
            let w = &writing[r];
            Ok(FactsToStore {
                guest_id: upserted[r][g]
                    .as_ref()
                    .ok_or_else(|| StoreError::Corrupt("a guest left out".into()))?
                    .id,
                facts: w.item.report.guests[g]
                    .facts
                    .as_ref()
                    .ok_or_else(|| StoreError::Corrupt("facts left out".into()))?,
                received_ms: w.item.received_ms,
            })
        })
        .collect::<StoreResult<_>>()?;
    let mut stored_facts: HashMap<(usize, usize), StoredFacts> = with_facts
        .into_iter()
        .zip(super::facts::record_facts(tx, &facts).await?)
        .collect();

    // The first report binds a token made without --host to its host (when it was last used
    // is written once a batch, by the caller).
    for w in writing.iter().filter(|w| w.unbound) {
        sqlx::query("UPDATE tokens SET host_name = COALESCE(host_name, $1) WHERE id = $2")
            .bind(&w.item.report.host.name)
            .bind(w.item.token_id)
            .execute(&mut **tx)
            .await?;
    }

    writing
        .iter()
        .zip(upserted)
        .enumerate()
        .map(|(r, (w, rows))| {
            let report = w.item.report;
            report
                .guests
                .iter()
                .zip(&w.spans)
                .zip(rows)
                .enumerate()
                .map(|(g, ((guest, span), row))| {
                    let row = row.ok_or_else(|| StoreError::Corrupt("a guest left out".into()))?;
                    Ok(StoredGuest::assemble(
                        report,
                        w.host_id,
                        w.host_reports,
                        guest,
                        span,
                        row,
                        w.item.received_ms,
                        stored_facts.remove(&(r, g)),
                    ))
                })
                .collect()
        })
        .collect()
}
/// The running totals stored for each host's guests, by host: what its next report's samples
/// are decided on.
async fn previous_totals(
    tx: &mut WriteTx,
    hosts: impl Iterator<Item = HostId>,
) -> StoreResult<HashMap<HostId, PreviousTotals>> {
    let sql = format!(
        "SELECT host_id, hypervisor, identity, process_key, cpu_s_total, wakeups_total,
            totals_at_ms
         FROM guests WHERE {} AND process_key IS NOT NULL",
        in_id_list("host_id", 1)
    );
    type Row = (HostId, String, String, String, f64, i64, i64);
    let mut previous: HashMap<HostId, PreviousTotals> = HashMap::new();
    for (host_id, hypervisor, identity, process_key, host_cpu_s, vcpu_wakeups, at_ms) in
        sqlx::query_as::<_, Row>(&sql)
            .bind(id_list(hosts.map(|h| h.0)))
            .fetch_all(&mut **tx)
            .await?
    {
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

/// Upserts the guests of a round at `chunk` ((report, guest) positions in `writing`); returns
/// their rows as the upsert left them, in no promised order.
async fn upsert_guests(
    tx: &mut WriteTx,
    writing: &[Writing<'_>],
    chunk: &[(usize, usize)],
) -> StoreResult<Vec<UpsertedGuest>> {
    // A round names each host once and a report each of its guests once (ingest makes
    // identities unique), as PostgreSQL requires of one upsert: it refuses to update a row
    // twice in one statement.
    let mut upsert = QueryBuilder::<DB>::new(
        "INSERT INTO guests AS g (host_id, hypervisor, identity, name, uuid, management, vcpus,
            pid, boot_args, uses_kvm, cpu_source, first_seen_ms, last_seen_ms, process_key,
            cpu_s_total, wakeups_total, totals_at_ms, vm_process, vm_process_since_ms,
            last_report_n) ",
    );
    upsert.push_values(chunk, |mut row, &(r, g)| {
        let w = &writing[r];
        let (report, now_ms) = (w.item.report, w.item.received_ms);
        let guest = &report.guests[g];
        let totals = guest.totals.as_ref();
        row.push_bind(w.host_id)
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
            .push_bind(now_ms)
            .push_bind(now_ms)
            .push_bind(totals.map(|t| &t.process_key))
            .push_bind(totals.map(|t| t.host_cpu_s))
            .push_bind(totals.map(|t| t.vcpu_wakeups))
            .push_bind(totals.map(|_| report.end_ms))
            .push_bind(&guest.vm_process)
            .push_bind(now_ms)
            .push_bind(w.host_reports);
    });
    // Every SET expression reads the row as it was stored (vm_process_since_ms compares
    // the stored vm_process, not the one set beside it), on PostgreSQL as on SQLite.
    upsert.push(
        " ON CONFLICT (host_id, hypervisor, identity) DO UPDATE SET
            name = excluded.name, uuid = excluded.uuid, management = excluded.management,
            vcpus = excluded.vcpus, pid = excluded.pid, boot_args = excluded.boot_args,
            uses_kvm = excluded.uses_kvm, cpu_source = excluded.cpu_source,
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
            boot_args, uses_kvm, cpu_source, last_seen_ms, first_seen_ms, vm_process_since_ms,
            {TOTALS}"
            .replace("{NEWER}", NEWER_TOTALS)
            .replace("{GREATEST}", GREATEST)
            .replace("{TOTALS}", &super::process_totals::totals_columns("")),
    );
    Ok(upsert
        .build_query_as::<UpsertedGuest>()
        .fetch_all(&mut **tx)
        .await?)
}

/// Inserts the samples of the guests at `chunk`, upserted already (`upserted`, by report and
/// guest position).
async fn insert_samples(
    tx: &mut WriteTx,
    writing: &[Writing<'_>],
    chunk: &[(usize, usize)],
    upserted: &[Vec<Option<UpsertedGuest>>],
) -> StoreResult<()> {
    let mut insert = QueryBuilder::<DB>::new(
        "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
            host_cpu_s, vcpu_wakeups, wakeups_source) ",
    );
    insert.push_values(chunk, |mut row, &(r, g)| {
        let w = &writing[r];
        let (report, span) = (w.item.report, &w.spans[g]);
        let guest = &report.guests[g];
        row.push_bind(upserted[r][g].as_ref().map(|row| row.id))
            .push_bind(w.report_id)
            .push_bind(report.end_ms)
            .push_bind(w.item.received_ms)
            .push_bind(span.length_ms)
            .push_bind(i64::from(guest.vcpus))
            .push_bind(span.host_cpu_s)
            .push_bind(span.vcpu_wakeups)
            .push_bind(guest.wakeups_source);
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
