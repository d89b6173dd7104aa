//! Changes made to guests: the check a playbook makes before it changes a guest
//! (`GET /api/v1/guests/{id}/readiness`), the record it leaves after
//! (`POST /api/v1/guests/{id}/changes`, with the agent token of the guest's host), and what each
//! recorded change did (`GET /api/v1/guests/{id}/changes`, `GET /api/v1/changes`).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::errors::{DeliveryErrors, ReadErrors};
use super::guest_path::{guest_id, reported_guest};
use crate::analysis::change::Change;
use crate::analysis::readiness::{self, GuestNow, Readiness};
use crate::auth::{AgentToken, Viewer};
use crate::db::NewChangeRecord;
use crate::domain::GuestId;
use crate::error::{AppError, AppResult, ErrorBody};
use crate::fleet::AnalysedGuest;
use crate::fleet::change_records::{self, Outcome, RecordedChange, Unsettled};
use crate::state::AppState;

/// The longest `by` and `note` may be, in characters.
pub const MAX_BY_CHARS: usize = 200;
pub const MAX_NOTE_CHARS: usize = 2_000;
/// The most changes one list returns.
pub const MAX_LIST: i64 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(readiness_of))
        .routes(routes!(record, of_guest))
        .routes(routes!(all))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ReadinessQuery {
    /// The rule of the change to make (`remove_nohz_off`, `disable_hpet`, …), as the plan's
    /// inventory names it (`tickscope_change_rule`).
    rule: String,
}

fn guest_now<'a>(g: &'a AnalysedGuest, now_ms: i64) -> GuestNow<'a> {
    GuestNow {
        suggestions: &g.verdict.suggestions,
        mode: g.verdict.classification.mode,
        idle_share: g.verdict.activity.idle_share(),
        silent_ms: now_ms - g.last_seen_ms,
    }
}

/// Whether a change may be made to a guest now: it still has the change among its suggestions,
/// it idles, and its host reports it. A playbook asks before it touches the guest and stops
/// with `reason` when `ready` is false.
#[utoipa::path(
    get,
    path = "/api/v1/guests/{id}/readiness",
    operation_id = "guest_readiness",
    tag = "changes",
    params(("id" = i64, Path, description = "The guest's id"), ReadinessQuery),
    security(("token" = [])),
    responses(
        (status = 200, description = "Whether the change may be made now, and why", body = Readiness),
        (status = 400, description = "No `rule`", body = ErrorBody),
        (status = 404, description = "No such guest is reported now", body = ErrorBody),
        ReadErrors,
    )
)]
async fn readiness_of(
    State(state): State<AppState>,
    _viewer: Viewer,
    id: Result<Path<i64>, PathRejection>,
    query: Result<Query<ReadinessQuery>, QueryRejection>,
) -> AppResult<Json<Readiness>> {
    let id = guest_id(id)?;
    let Query(query) = query.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let now = state.clock.now_ms();
    let guest = reported_guest(&state, id, now).await?;
    Ok(Json(readiness::readiness(
        &query.rule,
        &guest_now(&guest, now),
    )))
}

/// A change made to a guest, as its recorder says it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ChangeSubmission {
    /// The rule of the change made, one of the guest's suggestions now.
    rule: String,
    /// Who made it (a person, or Ansible's user on its controller), at most 200 characters.
    #[schema(min_length = 1, max_length = 200)]
    by: String,
    /// Anything to keep with it (a ticket, the playbook), at most 2,000 characters.
    #[serde(default)]
    #[schema(max_length = 2000)]
    note: String,
}

/// A recorded change and what it did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ChangeJson {
    id: i64,
    guest_id: i64,
    rule: String,
    kind: String,
    title: String,
    /// When it was recorded, as made, Unix ms.
    made_at_ms: i64,
    made_by: String,
    /// The name of the token that recorded it (gone: null).
    recorded_with: Option<String>,
    note: String,
    /// The saving its suggestion projected when it was made, % of one core.
    projected_cpu_pct: Option<f64>,
    /// `measuring` for the hour after it, then `measured` or `not_enough_idle_time`.
    outcome: Outcome,
    /// Its guest's host CPU while idle in the hour before and after it, as measured so far.
    measured: Option<Change>,
}

impl From<RecordedChange> for ChangeJson {
    fn from(c: RecordedChange) -> Self {
        let r = c.record;
        ChangeJson {
            id: r.id.0,
            guest_id: r.guest_id.0,
            rule: r.rule,
            kind: r.kind,
            title: r.title,
            made_at_ms: r.made_at_ms,
            made_by: r.made_by,
            recorded_with: r.token_name,
            note: r.note,
            projected_cpu_pct: r.projected_cpu_pct,
            outcome: c.outcome,
            measured: c.measured,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ChangeList {
    changes: Vec<ChangeJson>,
}

/// Text a recorder gives, checked: printable, trimmed, at most `max` characters.
fn checked_text(field: &str, value: &str, max: usize, required: bool) -> AppResult<String> {
    let value = value.trim();
    if required && value.is_empty() {
        return Err(AppError::invalid(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(AppError::invalid(
            field,
            format!("may be at most {max} characters"),
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(AppError::invalid(field, "must not hold control characters"));
    }
    Ok(value.to_string())
}

/// Records a change made to a guest, with the agent token of the host the guest runs on (the
/// token a playbook reads from the vault the rollout wrote). The change must be one of the
/// guest's suggestions now: a playbook records it after it made the change and before the
/// reboot or restart that puts it into effect. What the change did is measured around the time
/// it was recorded, for the hour after it.
#[utoipa::path(
    post,
    path = "/api/v1/guests/{id}/changes",
    operation_id = "record_guest_change",
    tag = "changes",
    params(("id" = i64, Path, description = "The guest's id")),
    request_body = ChangeSubmission,
    security(("token" = [])),
    responses(
        (status = 200, description = "Recorded", body = ChangeJson),
        (status = 403, description = "Not an agent token, or one of another host than the guest's", body = ErrorBody),
        (status = 404, description = "No such guest is reported now", body = ErrorBody),
        (status = 409, description = "The change is not among the guest's suggestions now", body = ErrorBody),
        (status = 413, description = "The body is over 256 KiB", body = ErrorBody),
        DeliveryErrors,
    )
)]
async fn record(
    State(state): State<AppState>,
    AgentToken { token_id }: AgentToken,
    id: Result<Path<i64>, PathRejection>,
    body: Result<Json<ChangeSubmission>, JsonRejection>,
) -> AppResult<Json<ChangeJson>> {
    let id = guest_id(id)?;
    let submission = json_body(body, crate::http::admission::MAX_OTHER_TOKEN_BODY_BYTES)?;
    let by = checked_text("by", &submission.by, MAX_BY_CHARS, true)?;
    let note = checked_text("note", &submission.note, MAX_NOTE_CHARS, false)?;
    let now = state.clock.now_ms();
    let guest = reported_guest(&state, id, now).await?;
    let host = state.db.agent_token_host(token_id).await?;
    if host.as_deref() != Some(guest.host.as_str()) {
        return Err(AppError::Forbidden(format!(
            "guest {id} runs on host {:?}; this agent token is {}",
            guest.host,
            match host {
                Some(h) => format!("host {h:?}'s"),
                None => "bound to no host yet".into(),
            }
        )));
    }
    let Some(suggestion) = guest
        .verdict
        .suggestions
        .iter()
        .find(|s| s.rule == submission.rule)
    else {
        return Err(AppError::Conflict(format!(
            "guest {id} has no suggestion {:?} now (it has: {}); record a change before the reboot or restart that puts it into effect",
            submission.rule,
            readiness::rules_of(&guest.verdict.suggestions).unwrap_or_else(|| "none".into())
        )));
    };
    let made = NewChangeRecord {
        guest_id: id,
        rule: suggestion.rule,
        kind: suggestion.kind.as_str(),
        title: suggestion.title,
        made_at_ms: now,
        recorded_ms: now,
        made_by: &by,
        token_id: Some(token_id),
        note: &note,
        projected_cpu_pct: suggestion.saving_cpu_pct,
    };
    let record_id = state.db.record_change(&made).await?;
    tracing::info!(
        guest = id.0,
        rule = suggestion.rule,
        by = ?by,
        "change recorded"
    );
    let row = state
        .db
        .change_record(record_id)
        .await?
        .ok_or_else(|| AppError::Internal("the change just recorded is not there".into()))?;
    let recorded = change_records::outcomes(&state.db, vec![row], now, Unsettled::Measure).await?;
    let json = recorded
        .into_iter()
        .next()
        .map(ChangeJson::from)
        .ok_or_else(|| AppError::Internal("the change just recorded is not there".into()))?;
    Ok(Json(json))
}

/// A guest's recorded changes, newest first, each with what it did.
#[utoipa::path(
    get,
    path = "/api/v1/guests/{id}/changes",
    operation_id = "guest_changes",
    tag = "changes",
    params(("id" = i64, Path, description = "The guest's id")),
    security(("token" = [])),
    responses(
        (status = 200, description = "Its recorded changes (none for an id no guest has)", body = ChangeList),
        (status = 404, description = "The id is not a number", body = ErrorBody),
        ReadErrors,
    )
)]
async fn of_guest(
    State(state): State<AppState>,
    _viewer: Viewer,
    id: Result<Path<i64>, PathRejection>,
) -> AppResult<Json<ChangeList>> {
    // One guest's list measures its unsettled changes so far: a few, for one guest.
    listed(&state, Some(guest_id(id)?), Unsettled::Measure).await
}

/// The fleet's recorded changes, newest first (at most 500), each with what it did; one still
/// in its hour after is `measuring` without figures (its guest's list has them so far).
#[utoipa::path(
    get,
    path = "/api/v1/changes",
    operation_id = "changes",
    tag = "changes",
    security(("token" = [])),
    responses(
        (status = 200, description = "The recorded changes", body = ChangeList),
        ReadErrors,
    )
)]
async fn all(State(state): State<AppState>, _viewer: Viewer) -> AppResult<Json<ChangeList>> {
    listed(&state, None, Unsettled::Skip).await
}

/// The newest [`MAX_LIST`] changes, of one guest or of all, with what each did.
async fn listed(
    state: &AppState,
    guest: Option<GuestId>,
    unsettled: Unsettled,
) -> AppResult<Json<ChangeList>> {
    let now = state.clock.now_ms();
    let rows = state.db.change_records(guest, MAX_LIST).await?;
    let changes = change_records::outcomes(&state.db, rows, now, unsettled).await?;
    Ok(Json(ChangeList {
        changes: changes.into_iter().map(ChangeJson::from).collect(),
    }))
}
