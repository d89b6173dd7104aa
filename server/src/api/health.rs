//! `/healthz` (the process answers) and `/readyz` (it can do its job: store what agents send).
//! Both answer anyone, without a login: load balancers and monitors call them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::health::judge;
use crate::state::AppState;

/// A probe's answer is reused this long, so that calling `/readyz` in a loop costs no more than
/// one committed write a second.
const PROBE_REUSED_FOR_MS: i64 = 1000;

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    let readiness = {
        let mut cached = state.storage.probe_cache.lock().await;
        let now_ms = state.clock.now_ms();
        match &*cached {
            // A wall clock set back makes the answer stale, not reused until it catches up.
            Some((at_ms, readiness)) if (0..PROBE_REUSED_FOR_MS).contains(&(now_ms - at_ms)) => {
                readiness.clone()
            }
            _ => {
                let probe = state
                    .db
                    .probe_write(now_ms)
                    .await
                    .map_err(|e| e.to_string());
                let readiness = judge(probe, state.db.free_bytes(), state.storage.fault(now_ms));
                *cached = Some((now_ms, readiness.clone()));
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
