//! Reports and their samples: one transaction per batch, and in it a savepoint per set of
//! reports of distinct hosts and tokens (usually the whole batch), each set written in a few
//! statements a table whatever its number of reports and guests. A set that fails is rolled
//! back to its savepoint and its reports are stored one by one, so that a report that fails
//! leaves the others stored (PostgreSQL refuses every statement of a transaction once one
//! failed; SQLite would carry on). The upserts name the row they update (`g.`, `hosts.`), which
//! PostgreSQL needs to tell it from `excluded`; unsigned counts are bound as 64-bit integers.
//! What a set writes, row by table, is in `report_rows.rs`.

use sqlx::QueryBuilder;

use super::dialect::{DB, JOIN_IN_ORDER, NAME_NOT_LIKE_PARAM_1, Store, WriteTx};
use super::report_rows::ROWS_PER_STATEMENT;
use crate::db::error::{StoreError, StoreResult};
use crate::db::reports::{ReportToStore, StoreOutcome, sets_apart};
use crate::db::rows_at_once::runs;
use crate::domain::{ReportId, TokenId};
use crate::ingest::ValidReport;
use crate::ingest::host_binding::{HostClaim, may_report};
use crate::ingest::process_totals::SampleSpan;
use crate::ingest::samples::PreviousTotals;

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
        for chunk in runs(&used, ROWS_PER_STATEMENT) {
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
    let mut stored = super::report_rows::store_reports_of_hosts(tx, &to_store, decide_samples)
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
/// and whether the report is a repeat: a statement for each run of the set (`rows_at_once`). A
/// report is a repeat only of one for the same host: another host's token cannot have this
/// host's reports taken for duplicates.
async fn judge(tx: &mut WriteTx, items: &[&ReportToStore<'_>]) -> StoreResult<Vec<Verdict>> {
    let numbered: Vec<(usize, &&ReportToStore<'_>)> = items.iter().enumerate().collect();
    let mut found: Vec<Option<(Option<String>, Option<ReportId>)>> = vec![None; items.len()];
    for run in runs(&numbered, ROWS_PER_STATEMENT) {
        let mut query = QueryBuilder::<DB>::new(format!(
            "SELECT v.column1, t.host_name,
                    (SELECT r.id FROM hosts h {JOIN_IN_ORDER} reports r ON r.host_id = h.id
                     WHERE h.name = v.column3 AND r.agent_id = v.column4 AND r.run_id = v.column5
                       AND r.seq = v.column6)
             FROM ("
        ));
        query.push_values(run, |mut row, (n, item)| {
            row.push_bind(*n as i64)
                .push_bind(item.token_id)
                .push_bind(&item.report.host.name)
                .push_bind(&item.report.agent_id)
                .push_bind(&item.report.run_id)
                .push_bind(item.report.seq);
        });
        query.push(") AS v JOIN tokens t ON t.id = v.column2");
        for (n, bound_host, seen) in query
            .build_query_as::<(i64, Option<String>, Option<ReportId>)>()
            .fetch_all(&mut **tx)
            .await?
        {
            if let Some(slot) = usize::try_from(n).ok().and_then(|n| found.get_mut(n)) {
                *slot = Some((bound_host, seen));
            }
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
