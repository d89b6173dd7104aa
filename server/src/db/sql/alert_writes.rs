//! What an alert evaluation writes: the alerts it opens, moves on, resolves and drops, with the
//! notifications they send, a few hundred a transaction and a statement per kind.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use super::dialect::{DB, Store, WriteTx, id_list, in_id_list};
use crate::db::alerts::{AlertResolution, AlertUpdate, AlertWrite, NewAlert, Notify};
use crate::db::error::{StoreError, StoreResult};
use crate::db::rows_at_once::runs;
use crate::domain::{AlertId, RuleId, Subject};

/// Alerts written per transaction by [`Store::write_alerts`], and so per statement at most (a
/// kind's writes go in runs of the few lengths `rows_at_once` allows).
const ALERT_WRITES_PER_TRANSACTION: usize = 256;

/// Notifications per statement at most, in runs as above: seven values each.
const NOTIFICATIONS_PER_STATEMENT: usize = 512;

impl Store {
    pub async fn write_alerts(&self, writes: Vec<AlertWrite>, now_ms: i64) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        // Under the write lock: another server's evaluation must not open the same alert or
        // move it on between this one's reads and writes. A few hundred alerts a transaction,
        // each kind in a statement a run (`rows_at_once`): at 100,000 guests an evaluation
        // writes thousands of alerts (tens of thousands when a fleet starts ticking), and one
        // transaction for them all, or a statement each, held the write lock for seconds,
        // which every report waited for. Any failed statement ends the function with its
        // transaction, which is rolled back when dropped: an alert and its notifications are
        // written together or not at all, and what was not written is evaluated again next
        // time.
        let mut writes = writes.into_iter().peekable();
        while writes.peek().is_some() {
            let chunk: Vec<AlertWrite> =
                writes.by_ref().take(ALERT_WRITES_PER_TRANSACTION).collect();
            let mut tx = self.begin_write().await?;
            let opened = open_alerts(&mut tx, &chunk, now_ms).await?;
            update_open_alerts(&mut tx, &chunk, now_ms).await?;
            resolve_alerts(&mut tx, &chunk, now_ms).await?;
            cancel_alerts(&mut tx, &chunk).await?;
            let mut notifications = Vec::new();
            for (write, opened_id) in chunk.iter().zip(opened) {
                let (alert_id, notify, transition) = match write {
                    AlertWrite::Open(a) => (opened_id, &a.notify, "firing"),
                    AlertWrite::Update(u) => (Some(u.alert_id), &u.notify, "firing"),
                    AlertWrite::Resolve(r) => (Some(r.alert_id), &r.notify, "resolved"),
                    AlertWrite::Cancel { .. } => continue,
                };
                let alert_id = alert_id.ok_or_else(|| {
                    StoreError::Corrupt("an alert opened was not given an id".into())
                })?;
                notifications.extend(notify.iter().map(|n| (alert_id, transition, n)));
            }
            insert_notifications(&mut tx, &notifications, now_ms).await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

/// The alerts of `chunk` to open, a statement a run; the ids of the chunk's writes, given for
/// those it opened.
async fn open_alerts(
    tx: &mut WriteTx,
    chunk: &[AlertWrite],
    now_ms: i64,
) -> StoreResult<Vec<Option<AlertId>>> {
    let opens: Vec<&NewAlert> = chunk
        .iter()
        .filter_map(|write| match write {
            AlertWrite::Open(a) => Some(a),
            _ => None,
        })
        .collect();
    let mut ids = vec![None; chunk.len()];
    if opens.is_empty() {
        return Ok(ids);
    }
    let mut opened: HashMap<(RuleId, Subject, i64), AlertId> = HashMap::with_capacity(opens.len());
    for run in runs(&opens, ALERT_WRITES_PER_TRANSACTION) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO alerts (rule_id, subject, subject_id, subject_name, host_name, state,
                active_ms, fired_ms, value, evaluated_ms, labels_json, annotations_json) ",
        );
        insert.push_values(run, |mut row, a| {
            row.push_bind(a.rule_id)
                .push_bind(a.subject)
                .push_bind(a.subject_id)
                .push_bind(a.subject_name.as_str())
                .push_bind(a.host_name.as_str())
                .push_bind(a.state)
                .push_bind(a.active_ms)
                .push_bind(a.fired_ms)
                .push_bind(a.value)
                .push_bind(now_ms)
                .push_bind(a.labels_json.as_str())
                .push_bind(a.annotations_json.as_str());
        });
        // Matched back by (rule, subject): the evaluation opens at most one alert for each.
        insert.push(" RETURNING rule_id, subject, subject_id, id");
        opened.extend(
            insert
                .build_query_as::<(RuleId, Subject, i64, AlertId)>()
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(|(rule_id, subject, subject_id, id)| ((rule_id, subject, subject_id), id)),
        );
    }
    for (write, id) in chunk.iter().zip(ids.iter_mut()) {
        if let AlertWrite::Open(a) = write {
            *id = opened.get(&(a.rule_id, a.subject, a.subject_id)).copied();
        }
    }
    Ok(ids)
}

/// The open alerts of `chunk` evaluated again (a new state, cause or figures), a statement a run.
async fn update_open_alerts(
    tx: &mut WriteTx,
    chunk: &[AlertWrite],
    now_ms: i64,
) -> StoreResult<()> {
    let updates: Vec<&AlertUpdate> = chunk
        .iter()
        .filter_map(|write| match write {
            AlertWrite::Update(u) => Some(u),
            _ => None,
        })
        .collect();
    for run in runs(&updates, ALERT_WRITES_PER_TRANSACTION) {
        // VALUES names its columns column1, column2, ... on both databases.
        let mut update = QueryBuilder::<DB>::new("UPDATE alerts SET evaluated_ms = ");
        update.push_bind(now_ms).push(
            ", state = v.column2, fired_ms = v.column3, value = v.column4,
             labels_json = COALESCE(v.column5, alerts.labels_json),
             annotations_json = v.column6
             FROM (",
        );
        update.push_values(run, |mut row, u| {
            row.push_bind(u.alert_id)
                .push_bind(u.state)
                .push_bind(u.fired_ms)
                .push_bind(u.value)
                .push_bind(u.labels_json.as_deref())
                .push_bind(u.annotations_json.as_str());
        });
        update.push(") AS v WHERE alerts.id = v.column1");
        update.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// The alerts of `chunk` that resolve, a statement a run.
async fn resolve_alerts(tx: &mut WriteTx, chunk: &[AlertWrite], now_ms: i64) -> StoreResult<()> {
    let resolves: Vec<&AlertResolution> = chunk
        .iter()
        .filter_map(|write| match write {
            AlertWrite::Resolve(r) => Some(r),
            _ => None,
        })
        .collect();
    for run in runs(&resolves, ALERT_WRITES_PER_TRANSACTION) {
        let mut update =
            QueryBuilder::<DB>::new("UPDATE alerts SET state = 'resolved', resolved_ms = ");
        update
            .push_bind(now_ms)
            .push(", evaluated_ms = ")
            .push_bind(now_ms)
            .push(", value = v.column2, annotations_json = v.column3 FROM (");
        update.push_values(run, |mut row, r| {
            row.push_bind(r.alert_id)
                .push_bind(r.value)
                .push_bind(r.annotations_json.as_str());
        });
        update.push(") AS v WHERE alerts.id = v.column1");
        update.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// The pending alerts of `chunk` whose condition cleared, dropped in one statement.
async fn cancel_alerts(tx: &mut WriteTx, chunk: &[AlertWrite]) -> StoreResult<()> {
    let ids: Vec<i64> = chunk
        .iter()
        .filter_map(|write| match write {
            AlertWrite::Cancel { alert_id } => Some(alert_id.0),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(&format!(
        "DELETE FROM alerts WHERE {} AND state = 'pending'",
        in_id_list("id", 1)
    ))
    .bind(id_list(ids))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The notifications of a chunk's transitions, a few hundred a statement.
async fn insert_notifications(
    tx: &mut WriteTx,
    notifications: &[(AlertId, &str, &Notify)],
    now_ms: i64,
) -> StoreResult<()> {
    for part in runs(notifications, NOTIFICATIONS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO outbox (receiver_id, alert_id, transition, payload, created_ms,
                next_attempt_ms, group_key) ",
        );
        insert.push_values(part, |mut row, (alert_id, transition, n)| {
            row.push_bind(n.receiver_id)
                .push_bind(*alert_id)
                .push_bind(*transition)
                .push_bind(n.payload.as_str())
                .push_bind(now_ms)
                .push_bind(now_ms)
                .push_bind(n.group_key.as_str());
        });
        // The unique (receiver, alert, transition) makes a second notification of the same
        // transition impossible, whatever happens around it; DO NOTHING skips it without
        // failing the statement (which would abort the transaction).
        insert.push(" ON CONFLICT (receiver_id, alert_id, transition) DO NOTHING");
        insert.build().execute(&mut **tx).await?;
    }
    Ok(())
}
