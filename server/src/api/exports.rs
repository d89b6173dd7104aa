//! Exports for viewers: the ranked guests as CSV, the upgrade plan as CSV and JSON.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::analysis::cost::CostModel;
use crate::analysis::plan::PlanGroup;
use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::error::{AppResult, ErrorBody};
use crate::{export, fleet};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(guests_csv))
        .routes(routes!(plan_csv))
        .routes(routes!(plan_json))
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

/// The ranked guests as CSV, one row per guest, most wasteful first.
#[utoipa::path(
    get,
    path = "/api/v1/guests.csv",
    operation_id = "export_guests_csv",
    tag = "exports",
    security(("token" = [])),
    responses(
        (status = 200, description = "CSV with a header row", body = String, content_type = "text/csv"),
        (status = 401, description = "No token or login, or an unknown or revoked token", body = ErrorBody),
        (status = 403, description = "The token is not a viewer token", body = ErrorBody),
        (status = 408, description = "The request took longer than the server's timeout"),
        (status = 500, description = "The server failed; its log says why", body = ErrorBody),
    )
)]
async fn guests_csv(State(state): State<AppState>, caller: Caller) -> AppResult<impl IntoResponse> {
    caller.require(Role::Viewer)?;
    let guests = state.ranked(now_ms()).await;
    Ok(csv_download(
        "guests",
        export::guests_csv(&guests, &state.cost_model())?,
    ))
}

/// The kernel-upgrade plan as CSV: guests grouped by distribution, kernel and tick mode.
#[utoipa::path(
    get,
    path = "/api/v1/plan.csv",
    operation_id = "export_plan_csv",
    tag = "exports",
    security(("token" = [])),
    responses(
        (status = 200, description = "CSV with a header row", body = String, content_type = "text/csv"),
        (status = 401, description = "No token or login, or an unknown or revoked token", body = ErrorBody),
        (status = 403, description = "The token is not a viewer token", body = ErrorBody),
        (status = 408, description = "The request took longer than the server's timeout"),
        (status = 500, description = "The server failed; its log says why", body = ErrorBody),
    )
)]
async fn plan_csv(State(state): State<AppState>, caller: Caller) -> AppResult<impl IntoResponse> {
    caller.require(Role::Viewer)?;
    let guests = state.ranked(now_ms()).await;
    let plan = fleet::plan(&guests);
    Ok(csv_download(
        "plan",
        export::plan_csv(&plan, &state.cost_model())?,
    ))
}

#[derive(Serialize, utoipa::ToSchema)]
struct PlanJson {
    generated_ms: i64,
    cost_model: CostModel,
    groups: Vec<PlanGroup>,
}

/// The kernel-upgrade plan: guests grouped by distribution, kernel and tick mode, the groups
/// with the most to save first.
#[utoipa::path(
    get,
    path = "/api/v1/plan",
    operation_id = "get_plan",
    tag = "exports",
    security(("token" = [])),
    responses(
        (status = 200, description = "The plan", body = PlanJson),
        (status = 401, description = "No token or login, or an unknown or revoked token", body = ErrorBody),
        (status = 403, description = "The token is not a viewer token", body = ErrorBody),
        (status = 408, description = "The request took longer than the server's timeout"),
        (status = 500, description = "The server failed; its log says why", body = ErrorBody),
    )
)]
async fn plan_json(State(state): State<AppState>, caller: Caller) -> AppResult<Json<PlanJson>> {
    caller.require(Role::Viewer)?;
    let now = now_ms();
    let guests = state.ranked(now).await;
    Ok(Json(PlanJson {
        generated_ms: now,
        cost_model: state.cost_model().clone(),
        groups: fleet::plan(&guests),
    }))
}
