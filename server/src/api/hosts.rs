//! `GET /api/v1/hosts`: each host's share of the waste and the baselines it learned, for viewers.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::analysis::cost::CostModel;
use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::error::AppResult;
use crate::fleet::{self, HostTotals};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/hosts", get(list))
}

#[derive(Serialize)]
struct HostList {
    hosts: Vec<HostTotals>,
    cost_model: CostModel,
    generated_ms: i64,
}

async fn list(State(state): State<AppState>, caller: Caller) -> AppResult<Json<HostList>> {
    caller.require(Role::Viewer)?;
    let now = now_ms();
    let guests = state.current.ranked(now);
    Ok(Json(HostList {
        hosts: fleet::host_totals(&guests, &state.cost_model()),
        cost_model: state.cost_model().clone(),
        generated_ms: now,
    }))
}
