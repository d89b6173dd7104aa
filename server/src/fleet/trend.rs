//! The fleet over time, as the overview and `GET /api/v1/fleet/history` read it: a point of the
//! fleet's totals every five minutes, written by the server that runs the retention, and the
//! last 30 days of them kept here, read again only from the newest one on, so that a page
//! costs the points it shows, not a query over the fleet's history.

use std::sync::{Arc, Mutex};

use super::live::LiveFleet;
use crate::analysis::cost::CostModel;
use serde::Serialize;

use crate::analysis::fleet_trend::{FleetBucket, FleetPoint, POINT_EVERY_MS, buckets, window};
use crate::analysis::range::Range;
use crate::db::Db;
use crate::domain::GuestId;
use crate::error::AppResult;

/// How long the points read are used before the newer ones are read.
const FRESH_FOR_MS: i64 = 60_000;

/// The fleet's points of the longest range, read once and then only from the newest on.
#[derive(Default)]
pub struct FleetTrend {
    kept: Mutex<Kept>,
}

#[derive(Default, Clone)]
struct Kept {
    /// When they were last read (server clock); `None`: never.
    read_ms: Option<i64>,
    points: Arc<Vec<FleetPoint>>,
}

impl FleetTrend {
    /// The points written in the last 30 days before `now_ms`, oldest first. The lock is held
    /// only to copy or swap what is kept: the query runs without it (two readers at once may
    /// both read the few new points).
    pub async fn points(&self, db: &Db, now_ms: i64) -> AppResult<Arc<Vec<FleetPoint>>> {
        let kept = self.kept.lock().expect("the fleet's points").clone();
        if kept
            .read_ms
            .is_some_and(|at| now_ms - at < FRESH_FOR_MS && at <= now_ms)
        {
            return Ok(kept.points);
        }
        let from_ms = now_ms - Range::Month.length_ms();
        // The newest point kept is read again: it is rewritten until its five minutes end.
        let newest = kept
            .points
            .last()
            .map(|p| p.at_ms)
            .filter(|at| *at >= from_ms);
        let fresh = db
            .fleet_points(newest.unwrap_or(from_ms), now_ms + POINT_EVERY_MS)
            .await?;
        let mut points: Vec<FleetPoint> = kept
            .points
            .iter()
            .filter(|p| p.at_ms >= from_ms && newest.is_some_and(|n| p.at_ms < n))
            .copied()
            .collect();
        points.extend(fresh);
        let points = Arc::new(points);
        *self.kept.lock().expect("the fleet's points") = Kept {
            read_ms: Some(now_ms),
            points: points.clone(),
        };
        Ok(points)
    }
}

/// The fleet's point as of `now_ms`, from what the pages count (the fleet's totals kept up to
/// date, and the changes measured so far).
pub async fn point_now(fleet: &LiveFleet, now_ms: i64) -> FleetPoint {
    let published = fleet.published();
    let totals = published.index(now_ms).totals(&CostModel::default());
    let realised = published.realised(now_ms);
    FleetPoint {
        at_ms: FleetPoint::at(now_ms),
        guests: totals.guests as i64,
        ticking: totals.ticking as i64,
        wasted_cpu_pct: totals.wasted_cores * 100.0,
        saved_cpu_pct: realised.saved_cpu_pct,
        changes: realised.guests as i64,
    }
}

/// Writes the fleet's point of now (one server of several: the one holding the lease).
pub async fn record(fleet: &LiveFleet, db: &Db, now_ms: i64) -> AppResult<FleetPoint> {
    let point = point_now(fleet, now_ms).await;
    db.record_fleet_point(&point).await?;
    Ok(point)
}

/// The fleet over a range: its buckets, and the kernel and command-line changes measured in it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FleetHistory {
    /// `24h`, `7d` or `30d`.
    pub range: &'static str,
    /// What it covers, `[from_ms, to_ms)`, in buckets of `step_ms`.
    pub from_ms: i64,
    pub to_ms: i64,
    pub step_ms: i64,
    pub buckets: Vec<FleetBucket>,
    /// The active guests' last changes made in the range, oldest first.
    pub changes: Vec<ChangeMark>,
}

/// A guest's kernel or command-line change, and what it saved as measured.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChangeMark {
    pub at_ms: i64,
    #[schema(value_type = i64)]
    pub guest_id: GuestId,
    pub guest: String,
    /// Host CPU it saved, in % of one core (negative: it costs more now).
    pub saved_cpu_pct: f64,
}

/// The fleet over `range` as of `now_ms`, with the active guests' changes made in it.
pub async fn history(
    fleet: &LiveFleet,
    trend: &FleetTrend,
    db: &Db,
    range: Range,
    now_ms: i64,
) -> AppResult<FleetHistory> {
    let (from_ms, to_ms) = window(range, now_ms);
    let points = trend.points(db, now_ms).await?;
    let published = fleet.published();
    // Kept by time: the range's changes are read, oldest first, not every guest's.
    let changes: Vec<ChangeMark> = published
        .changes_between(from_ms, to_ms, now_ms)
        .map(|(g, c)| ChangeMark {
            at_ms: c.at_ms,
            guest_id: g.id,
            guest: g.name.clone(),
            saved_cpu_pct: c.saved_cpu_pct,
        })
        .collect();
    Ok(FleetHistory {
        range: range.key(),
        from_ms,
        to_ms,
        step_ms: range.bucket_ms(),
        buckets: buckets(&points, from_ms, to_ms, range.bucket_ms()),
        changes,
    })
}
