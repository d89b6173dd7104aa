//! `GET /api/v1/hosts`: each host's share of the waste and the baselines it learned, for viewers.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::errors::ReadErrors;
use crate::analysis::cost::CostModel;
use crate::auth::Viewer;
use crate::error::AppResult;
use crate::fleet::{self, HostTotals};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Serialize, utoipa::ToSchema)]
struct HostList {
    hosts: Vec<HostTotals>,
    cost_model: CostModel,
    generated_ms: i64,
}

/// Each host's share of the waste, most wasteful first, with the tickless baselines it learned
/// and what its agent cannot see (`blind_spots`, each with its fix); hosts that reported in the
/// last 15 minutes without a guest come last.
#[utoipa::path(
    get,
    path = "/api/v1/hosts",
    operation_id = "list_hosts",
    tag = "fleet",
    security(("token" = [])),
    responses(
        (status = 200, description = "The hosts with active guests, and those that reported lately without any", body = HostList),
        ReadErrors,
    )
)]
async fn list(State(state): State<AppState>, _viewer: Viewer) -> AppResult<Json<HostList>> {
    let now = state.clock.now_ms();
    let model = state.cost_model();
    let mut hosts: Vec<_> = state
        .fleet
        .published()
        .index(now)
        .hosts_by_waste(&model)
        .collect();
    fleet::with_host_rows(&mut hosts, &state.db.hosts().await?, now);
    Ok(Json(HostList {
        hosts,
        cost_model: state.cost_model().clone(),
        generated_ms: now,
    }))
}
