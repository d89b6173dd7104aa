//! `/healthz` (the process answers) and `/readyz` (it can do its job: store what agents send).
//! Both answer anyone, without a login: load balancers and monitors call them.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::clock::now_ms;
use crate::health::judge;
use crate::state::AppState;

/// A probe's answer is reused this long, so that calling `/readyz` in a loop costs no more than
/// one committed write a second.
const PROBE_REUSED_FOR: Duration = Duration::from_secs(1);

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    let readiness = {
        let mut cached = state.storage.probe_cache.lock().await;
        match &*cached {
            Some((at, readiness)) if at.elapsed() < PROBE_REUSED_FOR => readiness.clone(),
            _ => {
                let probe = state
                    .db
                    .probe_write(now_ms())
                    .await
                    .map_err(|e| e.to_string());
                let readiness = judge(probe, state.db.free_bytes().ok(), state.storage.fault());
                *cached = Some((Instant::now(), readiness.clone()));
                readiness
            }
        }
    };
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness)).into_response()
}
