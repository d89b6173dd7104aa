//! `/healthz` (the process answers) and `/readyz` (it can do its job: store what agents send,
//! and whether it holds the lease that runs the alerts, notifications and retention). Both
//! answer anyone, without a login: load balancers and monitors call them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::health::{Readiness, judge};
use crate::state::AppState;

/// A probe's answer is reused this long, so that calling `/readyz` in a loop costs no more than
/// one committed write a second.
const PROBE_REUSED_FOR_MS: i64 = 1000;

/// `/readyz`'s body: the storage's readiness, and the lease as of this moment (`held` or
/// `standby`; a standby serves pages and takes reports all the same, so it is ready).
#[derive(serde::Serialize)]
struct Ready {
    #[serde(flatten)]
    readiness: Readiness,
    lease: &'static str,
}

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
    let body = Ready {
        readiness,
        // Not cached with the probe: a takeover shows at once.
        lease: state.lease.state(),
    };
    (status, Json(body)).into_response()
}
