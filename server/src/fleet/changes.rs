//! Kernel and command-line changes, measured: what a guest cost before and after.

use std::collections::HashMap;

use super::analysed::{intervals, reading, source_rank};
use crate::analysis::change::{self, Change};
use crate::analysis::idle;
use crate::db::{Db, IdleReading, IntervalRow};
use crate::domain::GuestId;
use crate::error::AppResult;

/// How far before and after a change its figures reach (never past the change before it).
pub const AROUND_CHANGE_MS: i64 = 60 * 60 * 1000;

/// Each guest's last kernel or command-line change with the host CPU of its idle intervals
/// before and after it, measured; only guests whose change has enough idle time on both sides.
/// `guest_id` limits it to one guest.
pub async fn changes(
    db: &Db,
    guest_id: Option<GuestId>,
    now_ms: i64,
) -> AppResult<HashMap<GuestId, Change>> {
    let last = last_changes(db.fact_changes(guest_id).await?);
    let (measured, _) = measure_changes(db, last, now_ms, &SettledChanges::new()).await?;
    Ok(measured)
}

/// Measurements of changes that lie far enough back that their figures can no longer change, by
/// (guest, change time): `None` for a change without enough idle time on a side.
pub type SettledChanges = HashMap<(GuestId, i64), Option<Change>>;

/// Measures each guest's last change, given as (at, previous) by guest; a change already in
/// `settled` is not read again. Returns the measured changes and every settled one among them.
pub(crate) async fn measure_changes(
    db: &Db,
    last: HashMap<GuestId, (i64, Option<i64>)>,
    now_ms: i64,
    settled: &SettledChanges,
) -> AppResult<(HashMap<GuestId, Change>, SettledChanges)> {
    let mut measured = HashMap::new();
    let mut now_settled = SettledChanges::new();
    for (guest, (at_ms, previous_ms)) in last {
        let change = match settled.get(&(guest, at_ms)) {
            Some(change) => *change,
            None => measure_change(db, guest, at_ms, previous_ms, now_ms).await?,
        };
        // Samples are received up to a report interval late; a minute's margin covers that.
        if now_ms > at_ms + AROUND_CHANGE_MS + 60_000 {
            now_settled.insert((guest, at_ms), change);
        }
        if let Some(change) = change {
            measured.insert(guest, change);
        }
    }
    Ok((measured, now_settled))
}

/// Measures one change of a guest at `at_ms`: its idle intervals in the hour before (not past
/// `previous_ms`) and after (not past `now_ms`).
pub(crate) async fn measure_change(
    db: &Db,
    guest: GuestId,
    at_ms: i64,
    previous_ms: Option<i64>,
    now_ms: i64,
) -> AppResult<Option<Change>> {
    measure_around(db, guest, at_ms, at_ms, previous_ms, now_ms).await
}

/// As [`measure_change`], with the "after" side starting at `after_from_ms` (at or after
/// `at_ms`, and within its hour): a change recorded before the reboot that puts it into effect
/// is judged from the new boot on, as a kernel change is.
pub(crate) async fn measure_around(
    db: &Db,
    guest: GuestId,
    at_ms: i64,
    after_from_ms: i64,
    previous_ms: Option<i64>,
    now_ms: i64,
) -> AppResult<Option<Change>> {
    // Idle intervals only: the reboot into the new kernel, and any work around it, is not
    // what the change is about.
    let activity = |(samples, readings): (Vec<IntervalRow>, Vec<IdleReading>)| {
        let readings: Vec<idle::Reading> = readings.iter().map(reading).collect();
        idle::activity(&intervals(&samples, &readings))
    };
    let from_ms = previous_ms.map_or(at_ms - AROUND_CHANGE_MS, |p| {
        (p + 1).max(at_ms - AROUND_CHANGE_MS)
    });
    let before = activity(
        db.samples_between(guest, from_ms, at_ms, idle::DEFAULT_READING_SPAN_MS)
            .await?,
    );
    let to_ms = (at_ms + 1 + AROUND_CHANGE_MS).min(now_ms + 1);
    let after = activity(
        db.samples_between(
            guest,
            after_from_ms.max(at_ms) + 1,
            to_ms,
            idle::DEFAULT_READING_SPAN_MS,
        )
        .await?,
    );
    let idle_share_after = after.idle_share().unwrap_or(0.0);
    Ok(change::measure(
        at_ms,
        &before.idle,
        &after.idle,
        idle_share_after,
    ))
}

/// Each guest's last change and the one before it, as (at, previous), from the changes every
/// source saw, oldest first. One reboot is seen by each source that reports that guest (the probe
/// at once, a guest agent up to its next question), so only the best source that saw changes
/// counts; the others would make one reboot look like two.
pub fn last_changes(changes: Vec<(GuestId, String, i64)>) -> HashMap<GuestId, (i64, Option<i64>)> {
    let mut by_guest: HashMap<GuestId, Vec<(String, i64)>> = HashMap::new();
    for (guest, source, at_ms) in changes {
        by_guest.entry(guest).or_default().push((source, at_ms));
    }
    by_guest
        .into_iter()
        .filter_map(|(guest, changes)| {
            let best = changes.iter().map(|(s, _)| source_rank(s)).max()?;
            let times: Vec<i64> = changes
                .iter()
                .filter(|(s, _)| source_rank(s) == best)
                .map(|(_, at)| *at)
                .collect();
            let at = *times.last()?;
            let previous = times.len().checked_sub(2).map(|i| times[i]);
            Some((guest, (at, previous)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reboot_seen_by_two_sources_is_one_change() {
        let changes = vec![
            (1, "probe_channel".to_string(), 1_000),
            (1, "probe_channel".to_string(), 5_000),
            // The guest agent noticed the second reboot ten minutes later.
            (1, "qemu_guest_agent".to_string(), 605_000),
            // A guest only a guest agent reports: its changes count.
            (2, "qemu_guest_agent".to_string(), 7_000),
        ];
        let last = last_changes(
            changes
                .into_iter()
                .map(|(g, s, at)| (GuestId(g), s, at))
                .collect(),
        );
        assert_eq!(last[&GuestId(1)], (5_000, Some(1_000)));
        assert_eq!(last[&GuestId(2)], (7_000, None));
    }
}
