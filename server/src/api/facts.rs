//! `POST /api/v1/guest-facts`: a guest probe delivering its own facts with a guest token.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::Serialize;
use tickscope_wire::FactsSubmission;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::errors::DeliveryErrors;
use crate::auth::GuestToken;
use crate::error::{AppError, AppResult, ErrorBody};
use crate::ingest::facts;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

#[derive(Serialize, utoipa::ToSchema)]
struct FactsAccepted {
    /// Always `stored`.
    status: &'static str,
    /// The guest the facts were joined to, by its DMI UUID.
    guest_id: i64,
}

/// A guest probe's facts about its own kernel, sent with a guest token. They go to the guest
/// the token is bound to: the VM with the DMI UUID in the facts on one host, which a host agent
/// must report; the first delivery binds the token to the one such guest reported now (see
/// docs/security.md, "Tokens").
#[utoipa::path(
    post,
    path = "/api/v1/guest-facts",
    operation_id = "post_guest_facts",
    tag = "agents",
    request_body = FactsSubmission,
    security(("token" = [])),
    responses(
        (status = 200, description = "Stored", body = FactsAccepted),
        (status = 403, description = "Not a guest token, or one that delivers for another UUID", body = ErrorBody),
        (status = 404, description = "No VM with this UUID that this token may deliver for is reported now: none is reported yet, another guest token holds it, or several hosts report it (the same answer for each)", body = ErrorBody),
        (status = 413, description = "The body is over 256 KiB", body = ErrorBody),
        (status = 429, description = "This guest token delivers more often than the server takes; see Retry-After", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        DeliveryErrors,
    )
)]
async fn receive(
    State(state): State<AppState>,
    GuestToken { token_id }: GuestToken,
    body: Result<Json<FactsSubmission>, JsonRejection>,
) -> AppResult<Json<FactsAccepted>> {
    let submission = json_body(body, crate::http::admission::MAX_OTHER_TOKEN_BODY_BYTES)?;
    let facts = facts::validate("facts", "probe_direct", submission.facts)?;
    let uuid = facts.facts.dmi_uuid.clone().ok_or_else(|| {
        AppError::invalid(
            "facts.dmi_uuid",
            "is needed to find the guest (run the probe as root so it can read /sys/class/dmi/id/product_uuid)",
        )
    })?;
    let guest_id = state
        .intake
        .store_guest_facts(token_id, uuid, facts, state.clock.now_ms())
        .await?;
    Ok(Json(FactsAccepted {
        status: "stored",
        guest_id: guest_id.0,
    }))
}
