//! `/healthz` (the process answers) and `/readyz` (it can do its job: store what agents send).
//! Both answer anyone, without a login: load balancers and monitors call them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::state::AppState;

/// Below this much free space the next report may not fit: the server says it cannot write.
pub const MIN_FREE_BYTES: u64 = 1024 * 1024;
/// A probe's answer is reused this long, so that calling `/readyz` in a loop costs no more than
/// one committed write a second.
const PROBE_REUSED_FOR_MS: i64 = 1000;

pub async fn healthz() -> &'static str {
    "ok\n"
}

/// What `/readyz` answers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Readiness {
    pub ready: bool,
    /// `writable`, or `cannot write`.
    pub database: &'static str,
    /// Why the database cannot be written, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Free bytes on the file system holding the database, if it could be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
}

/// Judges readiness from a write just tried, the free space, and what the last report met.
pub fn judge(
    probe: Result<(), String>,
    free_bytes: Option<u64>,
    last_report_fault: Option<String>,
) -> Readiness {
    let reason = match (probe, free_bytes, last_report_fault) {
        (Err(e), _, _) => Some(e),
        (Ok(()), Some(free), _) if free < MIN_FREE_BYTES => Some(format!(
            "the file system holding the database has {free} bytes free"
        )),
        (Ok(()), _, Some(fault)) => Some(format!("the last report could not be stored: {fault}")),
        (Ok(()), _, None) => None,
    };
    Readiness {
        ready: reason.is_none(),
        database: if reason.is_none() {
            "writable"
        } else {
            "cannot write"
        },
        reason,
        free_bytes,
    }
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
                let readiness = judge(
                    probe,
                    state.db.free_bytes().ok(),
                    state.storage.fault(now_ms),
                );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe, free bytes, the last report's fault, and a part of the reason (none: ready).
    type Case = (
        Result<(), String>,
        Option<u64>,
        Option<String>,
        Option<&'static str>,
    );

    #[test]
    fn the_database_is_writable_only_when_every_sign_says_so() {
        let full = || Some("the server's disk is full".to_string());
        let cases: [Case; 6] = [
            (Ok(()), Some(10 << 20), None, None),
            // Free space unknown (statvfs failed): the probe's word stands.
            (Ok(()), None, None, None),
            (
                Err("read-only".into()),
                Some(10 << 20),
                None,
                Some("read-only"),
            ),
            (Ok(()), Some(4096), None, Some("has 4096 bytes free")),
            (
                Ok(()),
                Some(10 << 20),
                full(),
                Some("could not be stored: the server's disk"),
            ),
            (
                Err("disk I/O error".into()),
                Some(0),
                full(),
                Some("disk I/O error"),
            ),
        ];
        for (probe, free, fault, reason) in cases {
            let r = judge(probe.clone(), free, fault.clone());
            assert_eq!(r.ready, reason.is_none(), "{probe:?} {free:?} {fault:?}");
            match reason {
                Some(part) => {
                    assert_eq!(r.database, "cannot write");
                    assert!(r.reason.as_deref().unwrap().contains(part), "{r:?}");
                }
                None => assert_eq!((r.database, r.reason), ("writable", None)),
            }
        }
    }
}
