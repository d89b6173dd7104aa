//! `POST /api/v1/guest-facts`: a guest probe delivering its own facts with a guest token.

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tickscope_agent::wire::{FactsSubmission, GUEST_FACTS_PATH};

use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::error::{AppError, AppResult};
use crate::facts;

pub fn router() -> Router<AppState> {
    Router::new().route(GUEST_FACTS_PATH, post(receive))
}

async fn receive(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<FactsSubmission>, JsonRejection>,
) -> AppResult<Json<Value>> {
    caller.require(Role::Guest)?;
    let submission = super::json_body(body, super::DEFAULT_BODY_LIMIT_BYTES)?;
    let facts = facts::validate("facts", "probe_direct", submission.facts)?;
    let uuid = facts.facts.dmi_uuid.clone().ok_or_else(|| {
        AppError::invalid(
            "facts.dmi_uuid",
            "is needed to find the guest (run the probe as root so it can read /sys/class/dmi/id/product_uuid)",
        )
    })?;
    let guest_id = state
        .db
        .guest_by_uuid(&facts::uuid_forms(&uuid))
        .await?
        .ok_or_else(|| {
            AppError::NotFound(format!(
                "no host agent has reported a VM with UUID {uuid} (in either byte order) yet"
            ))
        })?;
    state
        .db
        .record_guest_facts(caller.token_id()?, &uuid, guest_id, &facts, now_ms())
        .await?;
    if let Some(host_id) = state.db.guest_host_id(guest_id).await? {
        state.refresh_host(host_id, now_ms()).await;
    }
    Ok(Json(json!({"status": "stored", "guest_id": guest_id})))
}
