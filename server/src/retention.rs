//! Keeping storage flat: a guest's raw samples older than `raw` become five-minute rollups of
//! the analysis windows they made, five-minute rollups older than `five_minute` are merged into
//! hourly ones, and hourly ones older than `hourly` are deleted, with the reports whose samples
//! are gone. The pages read rollups where raw samples no longer are (`fleet::History`).

use std::time::Duration;

use axum::extract::FromRef;

use crate::clock::SharedClock;
use crate::db::{Db, FIVE_MINUTES_MS, HOUR_MS, IDLE_READINGS_KEPT_MS};
use crate::error::AppResult;
use crate::fleet::{self, ANALYSIS_WINDOW_MS, AROUND_CHANGE_MS, LiveFleet, trend};
use crate::lease::Lease;

const HOUR: i64 = HOUR_MS;
const DAY: i64 = 24 * HOUR;

/// How long each resolution is kept, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub raw_ms: i64,
    pub five_minute_ms: i64,
    pub hourly_ms: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            raw_ms: 48 * HOUR,
            five_minute_ms: 14 * DAY,
            hourly_ms: 400 * DAY,
        }
    }
}

impl Retention {
    /// The shortest a tier may be kept, and why. The current state and the hour's chart read
    /// raw samples, a week's chart and the waste so far read five-minute windows, and each tier
    /// must outlast the one before it.
    pub fn check(&self) -> Result<(), String> {
        if self.raw_ms < 2 * HOUR {
            return Err(
                "raw samples must be kept at least 2 hours (the last hour's chart reads them)"
                    .into(),
            );
        }
        if self.raw_ms > IDLE_READINGS_KEPT_MS {
            return Err("raw samples may be kept at most 8 days: the guests' own idle readings, which judge them, are kept that long".into());
        }
        if self.five_minute_ms < 8 * DAY || self.five_minute_ms < self.raw_ms {
            return Err("five-minute rollups must be kept at least 8 days, and no shorter than raw samples (a week's chart reads them)".into());
        }
        if self.hourly_ms < self.five_minute_ms {
            return Err("hourly rollups must be kept no shorter than five-minute ones".into());
        }
        Ok(())
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    pub guests: usize,
    pub windows: usize,
    pub samples_deleted: u64,
    pub five_minute_merged: u64,
    pub expired: u64,
    /// Recorded changes whose measurement was stored for good.
    pub changes_settled: usize,
}

/// Rolls up and expires everything the retention says is due at `now_ms`.
pub async fn run<S>(state: &S, retention: Retention, now_ms: i64) -> AppResult<Outcome>
where
    Db: FromRef<S>,
    LiveFleet: FromRef<S>,
{
    let (db, live) = (Db::from_ref(state), LiveFleet::from_ref(state));
    let mut outcome = Outcome::default();
    // Whole analysis windows only, so that no window is cut in two.
    let raw_before =
        (now_ms - retention.raw_ms).div_euclid(ANALYSIS_WINDOW_MS) * ANALYSIS_WINDOW_MS;
    live.forget_silent(now_ms);
    // Before any samples are rolled up: a recorded change is measured from the raw samples of
    // the hour around it, which the shortest raw retention (2 hours) still holds.
    // A failure here is logged, not the pass's: the rollups and the expiry must still run.
    outcome.changes_settled = match fleet::change_records::settle(&db, now_ms).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "recorded changes could not be settled");
            0
        }
    };
    let mut keep_reports = Vec::new();
    // Every guest's last kernel or command-line change, read once for the run.
    let last_changes = fleet::last_changes(db.fact_changes(None).await?);
    for guest_id in db.guests_with_samples_before(raw_before).await? {
        let Some(guest) = live.guest(guest_id, now_ms).await? else {
            continue;
        };
        // The samples around the guest's last kernel or command-line change stay raw: what the
        // change saved is measured from them (`fleet::changes`).
        let keep = last_changes.get(&guest_id).map(|&(at_ms, _)| {
            let window = |t: i64| t.div_euclid(ANALYSIS_WINDOW_MS) * ANALYSIS_WINDOW_MS;
            (
                window(at_ms - AROUND_CHANGE_MS),
                window(at_ms + AROUND_CHANGE_MS) + 2 * ANALYSIS_WINDOW_MS,
            )
        });
        if let Some((from, to)) = keep {
            keep_reports.extend(
                db.reports_of_samples(guest_id, from, to.min(raw_before))
                    .await?,
            );
        }
        let history = fleet::History::load_samples(&db, guest_id, 0, raw_before).await?;
        let windows: Vec<_> = history
            .raw_summaries(&guest, 0)
            .into_iter()
            .filter(|(start, _)| !keep.is_some_and(|(from, to)| (from..to).contains(start)))
            .collect();
        outcome.samples_deleted += db
            .roll_up_guest(guest_id, &windows, raw_before, keep)
            .await?;
        outcome.windows += windows.len();
        outcome.guests += 1;
    }
    debug_assert_eq!(HOUR_MS % FIVE_MINUTES_MS, 0);
    let merge_before = (now_ms - retention.five_minute_ms).div_euclid(HOUR_MS) * HOUR_MS;
    outcome.five_minute_merged = db.merge_hourly_rollups(merge_before).await?;
    outcome.expired = db
        .expire(now_ms - retention.hourly_ms, raw_before, &keep_reports)
        .await?;
    Ok(outcome)
}

/// Runs the retention every `every`, the first time soon after start, while this server holds
/// the lease.
pub fn spawn<S>(state: S, retention: Retention, every: Duration)
where
    S: Send + Sync + 'static,
    Db: FromRef<S>,
    LiveFleet: FromRef<S>,
    SharedClock: FromRef<S>,
    Lease: FromRef<S>,
{
    let clock = SharedClock::from_ref(&state);
    let lease = Lease::from_ref(&state);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            // One server of several on a database rolls up: the one holding the lease. Each
            // forgets the hosts gone silent from its own memory.
            if !lease.held() {
                LiveFleet::from_ref(&state).forget_silent(clock.now_ms());
                continue;
            }
            // The fleet's point of these five minutes (the first tick is at once: a server
            // that starts writes one).
            let fleet = LiveFleet::from_ref(&state);
            if let Err(e) = trend::record(&fleet, &Db::from_ref(&state), clock.now_ms()).await {
                tracing::warn!(error = %e, "the fleet's point over time could not be written");
            }
            match run(&state, retention, clock.now_ms()).await {
                Ok(o)
                    if o.guests > 0
                        || o.five_minute_merged > 0
                        || o.expired > 0
                        || o.changes_settled > 0 =>
                {
                    tracing::info!(
                        guests = o.guests,
                        windows = o.windows,
                        samples_deleted = o.samples_deleted,
                        five_minute_merged = o.five_minute_merged,
                        expired = o.expired,
                        changes_settled = o.changes_settled,
                        "history rolled up"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "history could not be rolled up"),
            }
        }
    });
}
