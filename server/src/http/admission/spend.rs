//! A request's share of its credential's budget, carried with the request: its body's bytes
//! are counted against it as they arrive, and a streamed answer takes one of its streams.

use std::sync::{Arc, Mutex};

use crate::error::AppError;
use crate::http::spending::{Credential, Held, Spent};
use crate::metrics::Metrics;

/// How long a credential that spent its budget of requests is asked to wait.
const SPENT_RETRY_AFTER_S: u64 = 1;

/// A request's share of its credential's budget, in its extensions: a handler that streams its
/// answer takes one of the credential's streams with it.
#[derive(Clone)]
pub struct Spend(Arc<Mutex<Held>>);

impl Spend {
    /// The share of a request that took `held`.
    pub(super) fn new(held: Held) -> Spend {
        Spend(Arc::new(Mutex::new(held)))
    }

    /// One more streamed answer of the request's credential, held until the answer's last byte;
    /// 429 when it reads as many as it may already.
    pub fn stream(&self, metrics: &Metrics) -> Result<(), AppError> {
        let mut held = self.lock();
        held.stream()
            .map_err(|spent| refusal(metrics, spent, held.credential()))
    }

    /// `bytes` more of the request's body, held against its credential's budget; 429 past it.
    pub(super) fn body_bytes(&self, bytes: usize, metrics: &Metrics) -> Result<(), AppError> {
        let mut held = self.lock();
        held.body_bytes(bytes)
            .map_err(|spent| refusal(metrics, spent, held.credential()))
    }

    /// Who the request spends for.
    pub fn credential(&self) -> Credential {
        self.lock().credential()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One of the caller's streamed answers, held until the answer's last byte (see
/// [`Spend::stream`]); nothing to count for a handler called without the admission.
pub fn take_stream(spend: Option<&Spend>, metrics: &Metrics) -> Result<(), AppError> {
    spend.map_or(Ok(()), |spend| spend.stream(metrics))
}

/// A request refused for the budget of `credential` it `spent`: counted, and answered 429
/// saying which budget.
pub(super) fn refusal(metrics: &Metrics, spent: Spent, credential: Credential) -> AppError {
    metrics.refused(spent.budget(), credential.kind());
    AppError::TooManyRequests {
        message: spent.message(),
        retry_after_s: SPENT_RETRY_AFTER_S,
    }
}
