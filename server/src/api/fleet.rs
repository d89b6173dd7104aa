//! `GET /api/v1/fleet/history`: the fleet over the last day, week or month, for Grafana and
//! scripts; the overview's chart shows the same.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::errors::ReadErrors;
use crate::analysis::fleet_trend::{fleet_range, fleet_range_keys};
use crate::analysis::range::Range;
use crate::auth::Viewer;
use crate::error::ErrorBody;
use crate::error::{AppError, AppResult};
use crate::fleet::trend::{self, FleetHistory};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(history))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// `24h` (15-minute buckets, the default), `7d` (hourly) or `30d` (6-hour).
    range: Option<String>,
}

/// The fleet over time: per bucket, the host cores wasted while idle, the guests that ticked or
/// polled while idle, the active guests and the host cores saved by the changes measured so
/// far, each the mean of the points the server wrote in it (one every five minutes it ran; a
/// bucket without any has `points` 0 and null figures); and the active guests' kernel and
/// command-line changes made in the range.
#[utoipa::path(
    get,
    path = "/api/v1/fleet/history",
    operation_id = "fleet_history",
    tag = "fleet",
    params(HistoryQuery),
    security(("token" = [])),
    responses(
        (status = 200, description = "The fleet over the range", body = FleetHistory),
        (status = 400, description = "A `range` other than 24h, 7d or 30d", body = ErrorBody),
        ReadErrors,
    )
)]
async fn history(
    State(state): State<AppState>,
    _viewer: Viewer,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> AppResult<Json<FleetHistory>> {
    let Query(query) = query.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let range = match query.range.as_deref() {
        None => Range::Day,
        Some(key) => fleet_range(key).ok_or_else(|| {
            AppError::BadRequest(format!(
                "range must be one of {}, not {key:?}",
                fleet_range_keys()
            ))
        })?,
    };
    let now = state.clock.now_ms();
    Ok(Json(
        trend::history(&state.fleet, &state.trend, &state.db, range, now).await?,
    ))
}
