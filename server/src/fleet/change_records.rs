//! Changes made to guests, as recorded (by an Ansible playbook, with the agent token of the
//! guest's host), each measured around the time it was made: what the guest's host CPU did in
//! the hour before and after. A change settles once its hour after has passed; its figures are
//! then stored with it, so that a page reads them instead of the samples again.

use std::collections::HashMap;

use serde::Serialize;

use super::changes::{AROUND_CHANGE_MS, measure_around};
use crate::analysis::change::Change;
use crate::db::{ChangeRecordRow, Db, SettledFigures};
use crate::domain::GuestId;
use crate::error::AppResult;

/// Changes settled per pass of the retention job: each reads two hours of one guest's samples.
pub const SETTLE_PER_PASS: i64 = 200;
/// Samples arrive up to a report interval late: a change settles this long after its hour.
const SETTLE_MARGIN_MS: i64 = 60_000;

/// What became of a recorded change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its hour after has not passed: the figures may still change.
    Measuring,
    /// Settled with figures.
    Measured,
    /// Settled without enough idle time before or after it to judge.
    NotEnoughIdleTime,
}

/// A recorded change and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedChange {
    pub record: ChangeRecordRow,
    pub outcome: Outcome,
    /// The figures so far (measuring) or for good (measured).
    pub measured: Option<Change>,
}

impl RecordedChange {
    /// The host CPU it saved, in % of one core, once measured.
    pub fn saved_cpu_pct(&self) -> Option<f64> {
        self.measured.map(|c| c.saved_cpu_pct)
    }
}

fn settled_at(made_at_ms: i64) -> i64 {
    made_at_ms + AROUND_CHANGE_MS + SETTLE_MARGIN_MS
}

fn figures_of(change: Option<&Change>, settled_ms: i64) -> SettledFigures {
    SettledFigures {
        settled_ms: Some(settled_ms),
        cpu_before_pct: change.map(|c| c.cpu_before_pct),
        cpu_after_pct: change.map(|c| c.cpu_after_pct),
        wakeups_before: change.map(|c| c.wakeups_before),
        wakeups_after: change.map(|c| c.wakeups_after),
        idle_share_after: change.map(|c| c.idle_share_after),
        saved_cpu_pct: change.map(|c| c.saved_cpu_pct),
    }
}

fn change_of(made_at_ms: i64, f: &SettledFigures) -> Option<Change> {
    Some(Change {
        at_ms: made_at_ms,
        cpu_before_pct: f.cpu_before_pct?,
        cpu_after_pct: f.cpu_after_pct?,
        wakeups_before: f.wakeups_before?,
        wakeups_after: f.wakeups_after?,
        idle_share_after: f.idle_share_after?,
        saved_cpu_pct: f.saved_cpu_pct?,
    })
}

/// Each guest's records, by when they were made: the changes around a record, looked up in
/// log time. The "before" side of a record does not reach back past the change before it, and
/// its "after" side not past the next one: each change is credited with its own hour, not the
/// next one's saving too.
struct Neighbours(HashMap<GuestId, Vec<i64>>);

impl Neighbours {
    fn of(records: &[ChangeRecordRow]) -> Neighbours {
        let mut made: HashMap<GuestId, Vec<i64>> = HashMap::new();
        for r in records {
            made.entry(r.guest_id).or_default().push(r.made_at_ms);
        }
        for times in made.values_mut() {
            times.sort_unstable();
        }
        Neighbours(made)
    }

    /// When the guest's change before `record` and the one after it were made, if any.
    fn around(&self, record: &ChangeRecordRow) -> (Option<i64>, Option<i64>) {
        let Some(times) = self.0.get(&record.guest_id) else {
            return (None, None);
        };
        let before = times.partition_point(|&t| t < record.made_at_ms);
        let after = times.partition_point(|&t| t <= record.made_at_ms);
        (
            before.checked_sub(1).map(|i| times[i]),
            times.get(after).copied(),
        )
    }
}

/// How the records still in their hour are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsettled {
    /// Measured from the samples now: one guest's few changes (its page, the API).
    Measure,
    /// Left without figures: the fleet's many (the plan page counts them as measuring).
    Skip,
}

/// How long after a record the new boot's facts are looked for: a reboot or restart, and the
/// facts a guest sends as it comes up (a first set, then one with its measurements).
pub const BOOT_WITHIN_MS: i64 = 10 * 60 * 1000;

/// Where a recorded change's "after" side starts: at the last new facts the guest sent within
/// `BOOT_WITHIN_MS` of it (the new boot, as its probe or guest agent saw it come up), if any came
/// by `until_ms`, else at the record. A playbook records a change before the reboot or restart
/// that puts it into effect; the boot, and a guest just booted settling, are not what the change
/// did.
async fn after_from(db: &Db, record: &ChangeRecordRow, until_ms: i64) -> AppResult<i64> {
    let within = until_ms.min(record.made_at_ms + BOOT_WITHIN_MS);
    let boot = db
        .fact_changes(Some(record.guest_id))
        .await?
        .into_iter()
        .map(|(_, _, at_ms)| at_ms)
        .filter(|at_ms| *at_ms > record.made_at_ms && *at_ms <= within)
        .max();
    Ok(boot.unwrap_or(record.made_at_ms))
}

/// Measures a recorded change, its "after" side not past `until_ms`.
async fn measure_record(
    db: &Db,
    record: &ChangeRecordRow,
    previous_ms: Option<i64>,
    until_ms: i64,
) -> AppResult<Option<Change>> {
    let after = after_from(db, record, until_ms).await?;
    measure_around(
        db,
        record.guest_id,
        record.made_at_ms,
        after,
        previous_ms,
        until_ms,
    )
    .await
}

/// The records with what became of them: a settled one from its stored figures, one still in
/// its hour measured from the samples now, or not, as `unsettled` says.
pub async fn outcomes(
    db: &Db,
    records: Vec<ChangeRecordRow>,
    now_ms: i64,
    unsettled: Unsettled,
) -> AppResult<Vec<RecordedChange>> {
    let mut out = Vec::with_capacity(records.len());
    // Only records measured here need their neighbours: none on the plan page's many.
    let mut neighbours: Option<Neighbours> = None;
    for record in &records {
        let (outcome, measured) = match record.settled.settled_ms {
            Some(_) => match change_of(record.made_at_ms, &record.settled) {
                Some(change) => (Outcome::Measured, Some(change)),
                None => (Outcome::NotEnoughIdleTime, None),
            },
            None if unsettled == Unsettled::Skip => (Outcome::Measuring, None),
            None => {
                let (previous, next) = neighbours
                    .get_or_insert_with(|| Neighbours::of(&records))
                    .around(record);
                let until = next.map_or(now_ms, |next| next.min(now_ms) - 1);
                let change = measure_record(db, record, previous, until).await?;
                (Outcome::Measuring, change)
            }
        };
        out.push(RecordedChange {
            record: record.clone(),
            outcome,
            measured,
        });
    }
    Ok(out)
}

/// Measures the changes whose hour after has passed and stores their figures for good; returns
/// how many it settled. Run by the retention job.
pub async fn settle(db: &Db, now_ms: i64) -> AppResult<usize> {
    let due = db
        .unsettled_change_records(
            now_ms - AROUND_CHANGE_MS - SETTLE_MARGIN_MS,
            SETTLE_PER_PASS,
        )
        .await?;
    // Each guest's other records, read once per pass.
    let mut of_guest: HashMap<GuestId, Neighbours> = HashMap::new();
    for record in &due {
        let guest = record.guest_id;
        let neighbours = match of_guest.entry(guest) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Neighbours::of(
                &db.change_records(Some(guest), 1_000).await?,
            )),
        };
        let (earlier, next) = neighbours.around(record);
        let until = next.map_or(settled_at(record.made_at_ms), |next| {
            next.min(settled_at(record.made_at_ms)) - 1
        });
        let change = measure_record(db, record, earlier, until).await?;
        db.settle_change_record(record.id, &figures_of(change.as_ref(), now_ms))
            .await?;
    }
    Ok(due.len())
}

/// The recorded changes of one rule, summed: how many were made, how many measured, and what
/// those measured were projected to save and saved, in % of one core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RuleTally {
    pub made: usize,
    pub measured: usize,
    pub projected_cpu_pct: f64,
    pub saved_cpu_pct: f64,
}

/// Each rule's tally, from the records.
pub fn tally(changes: &[RecordedChange]) -> HashMap<String, RuleTally> {
    let mut by_rule: HashMap<String, RuleTally> = HashMap::new();
    for c in changes {
        let t = by_rule.entry(c.record.rule.clone()).or_default();
        t.made += 1;
        if let (Outcome::Measured, Some(saved)) = (c.outcome, c.saved_cpu_pct()) {
            t.measured += 1;
            t.saved_cpu_pct += saved;
            t.projected_cpu_pct += c.record.projected_cpu_pct.unwrap_or(0.0);
        }
    }
    by_rule
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ChangeRecordId;

    fn record(id: i64, guest: i64, made_at_ms: i64) -> ChangeRecordRow {
        ChangeRecordRow {
            id: ChangeRecordId(id),
            guest_id: GuestId(guest),
            rule: "remove_nohz_off".into(),
            kind: "boot_parameter".into(),
            title: String::new(),
            made_at_ms,
            recorded_ms: made_at_ms,
            made_by: "ansible".into(),
            token_name: None,
            note: String::new(),
            projected_cpu_pct: None,
            settled: SettledFigures::default(),
        }
    }

    #[test]
    fn a_records_neighbours_are_its_own_guests_changes_just_before_and_after() {
        // Guest 1 changed at 100, 300 and 200 (listed newest first or not), guest 2 at 250.
        let records = [
            record(1, 1, 300),
            record(2, 2, 250),
            record(3, 1, 100),
            record(4, 1, 200),
        ];
        let neighbours = Neighbours::of(&records);
        for (made_at_ms, guest, expected) in [
            (100, 1, (None, Some(200))),
            (200, 1, (Some(100), Some(300))),
            (300, 1, (Some(200), None)),
            // Another guest's changes are not its neighbours.
            (250, 2, (None, None)),
            // A guest not in the list has none.
            (250, 3, (None, None)),
        ] {
            assert_eq!(
                neighbours.around(&record(0, guest, made_at_ms)),
                expected,
                "guest {guest} at {made_at_ms}"
            );
        }
    }
}
