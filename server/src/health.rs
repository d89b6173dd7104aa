//! The storage's health: what the last report met, and what `/readyz` answers, judged from
//! what the server saw (a pure function of the write probe, the free space and the last
//! report's fault).

use serde::Serialize;

use crate::error::{AppError, AppResult};

/// Below this much free space the next report may not fit: the server says it cannot write.
pub const MIN_FREE_BYTES: u64 = 1024 * 1024;
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

/// What the last attempt to store a report found: a full disk or a database that cannot be
/// written is remembered until a report is stored again, or for a minute (agents that met it
/// wait before they send again, and a write probe that works then speaks for itself).
#[derive(Debug, Default)]
pub struct StorageStatus {
    /// The fault, and when it was met (ms, on the state's clock).
    fault: std::sync::Mutex<Option<(i64, String)>>,
    /// `/readyz`'s last answer and when it was found (ms, on the state's clock), reused for a
    /// moment.
    pub probe_cache: tokio::sync::Mutex<Option<(i64, Readiness)>>,
}

impl StorageStatus {
    /// The storage fault the last report met, if it met one.
    pub fn fault(&self, now_ms: i64) -> Option<String> {
        const REMEMBERED_FOR_MS: i64 = 60_000;
        self.fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            // A clock stepped back (NTP, a restored snapshot) forgets it rather than holding
            // it until the clock catches up: a server pulled from its load balancer by a stale
            // fault would never store the report that clears it.
            .filter(|(at_ms, _)| (0..REMEMBERED_FOR_MS).contains(&(now_ms - at_ms)))
            .map(|(_, fault)| fault.clone())
    }

    pub(crate) fn record<T>(&self, result: &AppResult<T>, now_ms: i64) {
        let fault = match result {
            Ok(_) => None,
            // A full disk may let the write probe through (SQLite reuses its write-ahead log's
            // pages) while reports do not fit: remembered. A database that is read-only or
            // failing fails the probe itself; one busy for a moment is no reason to be pulled
            // from a load balancer.
            Err(e @ AppError::StorageFull { .. }) => Some((now_ms, e.to_string())),
            // Refused for itself (a bad value, a wrong host), or busy: says nothing lasting
            // about the storage.
            Err(_) => return,
        };
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_remembered_for_a_minute_of_the_clock_and_never_past_a_step_back() {
        let full = || -> AppResult<()> {
            Err(AppError::StorageFull {
                message: "disk full".into(),
                retry_after_s: 30,
            })
        };
        let status = StorageStatus::default();
        status.record(&full(), 10_000);
        for (now_ms, remembered) in [
            (10_000, true),
            (69_999, true),
            (70_000, false),
            // The clock stepped back: forgotten, not held until it catches up.
            (9_999, false),
            (-1_000_000, false),
        ] {
            assert_eq!(status.fault(now_ms).is_some(), remembered, "at {now_ms}");
        }
        // A report stored clears it; a refusal for itself leaves it as it was.
        status.record(&full(), 20_000);
        status.record(&Err::<(), _>(AppError::BadRequest("no".into())), 20_001);
        assert!(status.fault(20_002).is_some());
        status.record(&Ok(()), 20_003);
        assert!(status.fault(20_004).is_none());
    }

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
