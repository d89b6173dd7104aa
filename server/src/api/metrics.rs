//! `GET /metrics`, for Prometheus, with a viewer token (`Authorization: Bearer …`).

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::error::AppResult;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>, caller: Caller) -> AppResult<impl IntoResponse> {
    caller.require(Role::Viewer)?;
    let guests = state.ranked(now_ms()).await;
    let alerts = state.db.open_alerts().await?;
    let text = state.metrics.render(&guests, &alerts)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    ))
}
