//! `GET /api/v1/alerts`: open alerts and the latest resolved ones, for viewers and scripts.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::errors::ReadErrors;
use crate::auth::Viewer;
use crate::db::AlertRow;
use crate::error::AppResult;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Serialize, utoipa::ToSchema)]
struct AlertJson {
    id: i64,
    rule_id: i64,
    rule: String,
    severity: String,
    /// `guest` or `host`.
    subject: String,
    subject_id: i64,
    subject_name: String,
    host: String,
    /// `pending`, `firing` or `resolved`.
    state: String,
    active_since_ms: i64,
    fired_ms: Option<i64>,
    resolved_ms: Option<i64>,
    /// The rule's measure: waste in % of a core, or seconds silent; as of the evaluation that
    /// changed the alert's state, or at most four evaluation intervals older than the last.
    value: f64,
    acknowledged_by: Option<String>,
}

impl From<AlertRow> for AlertJson {
    fn from(a: AlertRow) -> Self {
        AlertJson {
            id: a.id.0,
            rule_id: a.rule_id.0,
            rule: a.rule_name,
            severity: a.severity,
            subject: a.subject.as_str().to_string(),
            subject_id: a.subject_id,
            subject_name: a.subject_name,
            host: a.host_name,
            state: a.state.to_string(),
            active_since_ms: a.active_ms,
            fired_ms: a.fired_ms,
            resolved_ms: a.resolved_ms,
            value: a.value,
            acknowledged_by: a.acked_by,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct AlertList {
    /// Pending and firing, oldest first.
    open: Vec<AlertJson>,
    /// The last 100 resolved, newest first.
    resolved: Vec<AlertJson>,
    generated_ms: i64,
}

/// Open alerts and the latest resolved ones.
#[utoipa::path(
    get,
    path = "/api/v1/alerts",
    operation_id = "list_alerts",
    tag = "alerts",
    security(("token" = [])),
    responses(
        (status = 200, description = "Pending and firing alerts, and the last 100 resolved", body = AlertList),
        ReadErrors,
    )
)]
async fn list(State(state): State<AppState>, _viewer: Viewer) -> AppResult<Json<AlertList>> {
    Ok(Json(AlertList {
        open: state
            .db
            .open_alerts()
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
        resolved: state
            .db
            .resolved_alerts(100)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
        generated_ms: state.clock.now_ms(),
    }))
}
