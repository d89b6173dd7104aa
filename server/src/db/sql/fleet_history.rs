//! The fleet over time: a point of the fleet's totals every five minutes.

use super::dialect::Store;
use crate::analysis::fleet_trend::FleetPoint;
use crate::db::error::StoreResult;

impl Store {
    pub async fn record_fleet_point(&self, point: &FleetPoint) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO fleet_history (at_ms, guests, ticking, wasted_cpu_pct, saved_cpu_pct, changes)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (at_ms) DO UPDATE SET
                 guests = excluded.guests, ticking = excluded.ticking,
                 wasted_cpu_pct = excluded.wasted_cpu_pct,
                 saved_cpu_pct = excluded.saved_cpu_pct, changes = excluded.changes",
        )
        .bind(point.at_ms)
        .bind(point.guests)
        .bind(point.ticking)
        .bind(point.wasted_cpu_pct)
        .bind(point.saved_cpu_pct)
        .bind(point.changes)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn fleet_points(&self, from_ms: i64, to_ms: i64) -> StoreResult<Vec<FleetPoint>> {
        Ok(sqlx::query_as(
            "SELECT at_ms, guests, ticking, wasted_cpu_pct, saved_cpu_pct, changes
             FROM fleet_history WHERE at_ms >= $1 AND at_ms < $2 ORDER BY at_ms",
        )
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?)
    }
}
