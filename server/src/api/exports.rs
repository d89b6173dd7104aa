//! Exports for viewers: the ranked guests as CSV, the upgrade plan as CSV and JSON.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::analysis::cost::CostModel;
use crate::analysis::plan::PlanGroup;
use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::error::AppResult;
use crate::{export, fleet};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/guests.csv", get(guests_csv))
        .route("/api/v1/plan.csv", get(plan_csv))
        .route("/api/v1/plan", get(plan_json))
}

fn csv_download(name: &str, body: String) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"tickscope-{name}.csv\""),
            ),
        ],
        body,
    )
}

async fn guests_csv(State(state): State<AppState>, caller: Caller) -> AppResult<impl IntoResponse> {
    caller.require(Role::Viewer)?;
    let guests = state.current.ranked(now_ms());
    Ok(csv_download(
        "guests",
        export::guests_csv(&guests, &state.cost_model())?,
    ))
}

async fn plan_csv(State(state): State<AppState>, caller: Caller) -> AppResult<impl IntoResponse> {
    caller.require(Role::Viewer)?;
    let guests = state.current.ranked(now_ms());
    let plan = fleet::plan(&guests);
    Ok(csv_download(
        "plan",
        export::plan_csv(&plan, &state.cost_model())?,
    ))
}

#[derive(Serialize)]
struct PlanJson {
    generated_ms: i64,
    cost_model: CostModel,
    groups: Vec<PlanGroup>,
}

async fn plan_json(State(state): State<AppState>, caller: Caller) -> AppResult<Json<PlanJson>> {
    caller.require(Role::Viewer)?;
    let now = now_ms();
    let guests = state.current.ranked(now);
    Ok(Json(PlanJson {
        generated_ms: now,
        cost_model: state.cost_model().clone(),
        groups: fleet::plan(&guests),
    }))
}
