//! The slots that do the work, waited for briefly: a request that finds none free is answered
//! 503 with `Retry-After`, never left to stall.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::AppError;

/// How long a client that found no free slot is asked to wait.
const BUSY_RETRY_AFTER_S: u64 = 2;
/// Token and session lookups at once: each is one indexed read, so a few keep up with any
/// fleet, and leave the database's other connections to the requests already admitted.
pub(super) const LOOKUP_SLOTS: usize = 4;
/// `/readyz` probes at once (each may write to the database): a flood of probes waits for
/// these, never for anyone else's.
pub(super) const PROBE_SLOTS: usize = 2;

/// `permits` of `semaphore`, if they come within `patience`.
pub(super) async fn wait_for(
    semaphore: &Arc<Semaphore>,
    permits: u32,
    patience: Duration,
) -> Option<OwnedSemaphorePermit> {
    tokio::time::timeout(patience, semaphore.clone().acquire_many_owned(permits))
        .await
        .ok()?
        .ok()
}

/// The answer when no slot came in time.
pub(super) fn busy() -> AppError {
    AppError::Busy {
        message: "the server is serving as many requests as it can; retry shortly".into(),
        retry_after_s: BUSY_RETRY_AFTER_S,
    }
}
