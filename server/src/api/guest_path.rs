//! The guest a `/api/v1/guests/{id}/…` path names: its id, and the guest the fleet reports now.

use std::sync::Arc;

use axum::extract::Path;
use axum::extract::rejection::PathRejection;

use crate::domain::GuestId;
use crate::error::{AppError, AppResult};
use crate::fleet::AnalysedGuest;
use crate::state::AppState;

/// The path's guest id; one that is not a number names no guest (404, as an unknown one).
pub fn guest_id(id: Result<Path<i64>, PathRejection>) -> AppResult<GuestId> {
    let Path(id) = id.map_err(|_| AppError::NotFound("a guest id is a number".into()))?;
    Ok(GuestId(id))
}

/// The guest `id` as the fleet has it now; 404 for one it does not report.
pub async fn reported_guest(
    state: &AppState,
    id: GuestId,
    now_ms: i64,
) -> AppResult<Arc<AnalysedGuest>> {
    state
        .fleet
        .guest(id, now_ms)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("no guest {id} is reported now")))
}
