//! Exports for viewers: the ranked guests as CSV; the upgrade plan as CSV (by group and by
//! guest), JSON and an Ansible inventory. Demo data says so in each (see `export::Context`).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use std::collections::HashMap;

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::errors::ReadErrors;
use crate::analysis::cost::CostModel;
use crate::analysis::plan::PlanGroup;
use crate::auth::Viewer;
use crate::domain::GuestId;
use crate::error::{AppError, AppResult, ErrorBody};
use crate::export;
use crate::fleet::{self, AnalysedGuest};
use crate::http::admission::{Spend, take_stream};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(guests_csv))
        .routes(routes!(plan_csv))
        .routes(routes!(plan_json))
        .routes(routes!(plan_guests_csv))
        .routes(routes!(plan_inventory))
}

fn download(
    name: &str,
    extension: &str,
    content_type: &str,
    demo: bool,
    body: impl Into<Body>,
) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"{}\"",
                    export::file_name(name, extension, demo)
                ),
            ),
        ],
        body.into(),
    )
        .into_response()
}

/// A CSV export as a download, streamed: each chunk of rows is written when the connection
/// takes the previous one, so the first bytes leave at once and memory stays flat at any
/// fleet size. An error in a later row ends the body with an error (the client sees a broken
/// download, not a short file).
fn csv_download<C>(name: &str, demo: bool, chunks: C) -> Response
where
    C: Iterator<Item = AppResult<Vec<u8>>> + Send + 'static,
{
    download(
        name,
        "csv",
        "text/csv; charset=utf-8",
        demo,
        Body::from_stream(futures_util::stream::iter(chunks)),
    )
}

/// What `guests.csv` is asked for.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GuestsCsvQuery {
    /// Fill the 24-hour and 7-day waste columns: reads every guest's stored week, about 25 ms
    /// per guest with 48 hours of 10-second samples kept raw, so a large fleet's export takes
    /// long (at some 1,000 guests it meets the request timeout). Without it those columns are
    /// empty and the export takes the ranking as it is.
    #[serde(default)]
    pub history: bool,
}

/// The ranked guests as CSV, one row per guest, most wasteful first.
#[utoipa::path(
    get,
    path = "/api/v1/guests.csv",
    operation_id = "export_guests_csv",
    tag = "exports",
    params(GuestsCsvQuery),
    security(("token" = [])),
    responses(
        (status = 200, description = "CSV with a header row", body = String, content_type = "text/csv"),
        (status = 400, description = "`history` is not `true` or `false`", body = ErrorBody),
        ReadErrors,
    )
)]
async fn guests_csv(
    State(state): State<AppState>,
    _viewer: Viewer,
    spend: Option<Extension<Spend>>,
    query: Result<Query<GuestsCsvQuery>, QueryRejection>,
) -> AppResult<impl IntoResponse> {
    let Query(query) = query.map_err(|e| AppError::BadRequest(e.body_text()))?;
    take_stream(spend.as_deref(), &state.metrics)?;
    // Reading every guest's week is the database's heaviest read: a few such exports at once,
    // whoever asks, so that they never take the connections everyone else needs.
    let history = match query.history {
        true => Some(
            tokio::time::timeout(
                state.options.admission.queue_timeout,
                state.history_exports.clone().acquire_owned(),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| AppError::Busy {
                message: "as many exports with history as the server makes at once are being \
                          made; retry shortly"
                    .into(),
                retry_after_s: 5,
            })?,
        ),
        false => None,
    };
    let now = state.clock.now_ms();
    // The ranking's order, as ids: each batch of rows reads its guests as they are then, so
    // that the export holds no copy of the fleet however slowly it is read.
    let ids: Vec<GuestId> = state.fleet.published().ranked(now).map(|g| g.id).collect();
    let context = context(&state, now);
    let demo = context.demo;
    let batches = GuestBatches {
        ids,
        at: 0,
        rank: 0,
        fleet: state.fleet.clone(),
        db: state.db.clone(),
        context,
        history,
    };
    // Fused: a body may be polled again after its end (the compression layer's encoder does).
    let body = Body::from_stream(
        futures_util::stream::unfold(batches, |mut b| async move {
            let bytes = b.next().await?;
            Some((bytes, b))
        })
        .fuse(),
    );
    Ok(download(
        "guests",
        "csv",
        "text/csv; charset=utf-8",
        demo,
        body,
    ))
}

/// `guests.csv` a batch of guests at a time (see [`export::guests_csv_rows`]).
struct GuestBatches {
    ids: Vec<GuestId>,
    at: usize,
    /// Rows written so far: a guest gone since the export began has no row, and the ranks
    /// stay consecutive.
    rank: usize,
    fleet: fleet::LiveFleet,
    db: crate::db::Db,
    context: export::Context,
    /// Held while an export with history is made.
    history: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl GuestBatches {
    /// The next batch's CSV (the header first), or `None` at the end. A failure ends the body
    /// with an error: the client sees a broken download, not a short file.
    async fn next(&mut self) -> Option<AppResult<Vec<u8>>> {
        if self.at > self.ids.len() {
            return None;
        }
        let header = self.at == 0;
        let end = (self.at + fleet::WASTE_SO_FAR_BATCH).min(self.ids.len());
        let published = self.fleet.published();
        let now = self.context.now_ms;
        let guests: Vec<Arc<AnalysedGuest>> = self.ids[self.at..end]
            .iter()
            .filter_map(|id| published.guest(*id, now).cloned())
            .collect();
        drop(published);
        let first_rank = self.rank + 1;
        self.at = if end == self.ids.len() { end + 1 } else { end };
        self.rank += guests.len();
        let so_far = match self.history {
            Some(_) if !guests.is_empty() => {
                match fleet::waste_so_far_of(&self.db, &guests, now).await {
                    Ok(so_far) => so_far,
                    Err(e) => {
                        self.at = self.ids.len() + 1;
                        return Some(Err(e));
                    }
                }
            }
            _ => HashMap::new(),
        };
        Some(export::guests_csv_rows(
            first_rank,
            &guests,
            &so_far,
            &self.context,
            header,
        ))
    }
}

/// What the plan exports are made of: the ranking at one instant, its plan, and the context
/// (cost model, instant, demo) they are written with.
struct PlanInputs {
    guests: Vec<Arc<AnalysedGuest>>,
    plan: Vec<PlanGroup>,
    context: export::Context,
}

impl PlanInputs {
    async fn now(state: &AppState) -> PlanInputs {
        let now_ms = state.clock.now_ms();
        let guests = state.fleet.ranked(now_ms).await;
        PlanInputs {
            plan: fleet::plan(&guests),
            guests,
            context: context(state, now_ms),
        }
    }

    /// The plan as a streamed CSV download named `name`, its rows written by `rows`: a stream
    /// slot is taken first, as for every streamed export.
    async fn csv_download<C>(
        state: &AppState,
        spend: Option<Extension<Spend>>,
        name: &str,
        rows: impl FnOnce(Vec<PlanGroup>, &[Arc<AnalysedGuest>], export::Context) -> C,
    ) -> AppResult<Response>
    where
        C: Iterator<Item = AppResult<Vec<u8>>> + Send + 'static,
    {
        take_stream(spend.as_deref(), &state.metrics)?;
        let p = PlanInputs::now(state).await;
        let demo = p.context.demo;
        Ok(csv_download(name, demo, rows(p.plan, &p.guests, p.context)))
    }
}

fn context(state: &AppState, now_ms: i64) -> export::Context {
    export::Context {
        model: state.cost_model(),
        now_ms,
        demo: state.options.demo,
    }
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
        ReadErrors,
    )
)]
async fn plan_csv(
    State(state): State<AppState>,
    _viewer: Viewer,
    spend: Option<Extension<Spend>>,
) -> AppResult<Response> {
    PlanInputs::csv_download(&state, spend, "plan", export::plan_csv).await
}

/// The kernel-upgrade plan as CSV, one row per guest it changes: the guest's group (the
/// `group_key` of plan.csv and guests.csv), its change, what the change takes, and its saving.
#[utoipa::path(
    get,
    path = "/api/v1/plan-guests.csv",
    operation_id = "export_plan_guests_csv",
    tag = "exports",
    security(("token" = [])),
    responses(
        (status = 200, description = "CSV with a header row", body = String, content_type = "text/csv"),
        ReadErrors,
    )
)]
async fn plan_guests_csv(
    State(state): State<AppState>,
    _viewer: Viewer,
    spend: Option<Extension<Spend>>,
) -> AppResult<Response> {
    PlanInputs::csv_download(&state, spend, "plan-guests", export::plan_guests_csv).await
}

/// The kernel-upgrade plan as an Ansible inventory (YAML): a group per change, each guest the
/// plan changes once as a host of its change's group, with its id, hypervisor host, kernel and
/// saving as host variables.
#[utoipa::path(
    get,
    path = "/api/v1/plan-inventory.yml",
    operation_id = "export_plan_inventory_yaml",
    tag = "exports",
    security(("token" = [])),
    responses(
        (status = 200, description = "An Ansible inventory in YAML", body = Object, content_type = "application/yaml"),
        ReadErrors,
    )
)]
async fn plan_inventory(
    State(state): State<AppState>,
    _viewer: Viewer,
) -> AppResult<impl IntoResponse> {
    let p = PlanInputs::now(&state).await;
    Ok(download(
        "plan-inventory",
        "yml",
        "application/yaml; charset=utf-8",
        p.context.demo,
        export::plan_inventory(&p.plan, &p.guests, &p.context)?,
    ))
}

#[derive(Serialize, utoipa::ToSchema)]
struct PlanJson {
    generated_ms: i64,
    /// The server shows the simulated demo fleet, not measured guests.
    demo: bool,
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
        ReadErrors,
    )
)]
async fn plan_json(State(state): State<AppState>, _viewer: Viewer) -> AppResult<Json<PlanJson>> {
    let p = PlanInputs::now(&state).await;
    Ok(Json(PlanJson {
        generated_ms: p.context.now_ms,
        demo: p.context.demo,
        cost_model: p.context.model,
        groups: p.plan,
    }))
}
