//! A request's body, read as it arrives within its deadline, each piece held against its
//! credential's budget and the server's before it is kept: a body that trickles in holds what
//! it sent, never its whole limit up front.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::http::request::Parts;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::AdmissionLimits;
use super::slots::{busy, wait_for};
use super::spend::Spend;
use crate::error::AppError;
use crate::metrics::Metrics;

/// Bodies being read at once may hold this much memory in all: every connection's 64 KiB at the
/// default cap, or a few dozen of the largest reports.
const MAX_BUFFERED_BODY_BYTES: usize = 256 * 1024 * 1024;

/// The server's budget of body bytes, and how long a body may take.
pub(super) struct BodyMeter {
    /// One permit per byte of body being read or handled.
    body_bytes: Arc<Semaphore>,
    /// A whole body must arrive within this long.
    body_timeout: Duration,
    /// A piece of a body waits this long for the server's bytes before it is answered 503.
    queue_timeout: Duration,
}

impl BodyMeter {
    pub(super) fn new(limits: &AdmissionLimits) -> BodyMeter {
        BodyMeter {
            body_bytes: Arc::new(Semaphore::new(MAX_BUFFERED_BODY_BYTES)),
            body_timeout: limits.body_timeout,
            queue_timeout: limits.queue_timeout,
        }
    }

    /// Reads the body as it arrives, each piece taken from the credential's budget and the
    /// server's before it is kept, within the body's deadline; returns it with the server's
    /// bytes it holds.
    pub(super) async fn read(
        &self,
        parts: &Parts,
        body: Body,
        limit_bytes: usize,
        spend: &Spend,
        metrics: &Metrics,
    ) -> Result<(Bytes, Option<OwnedSemaphorePermit>), AppError> {
        let too_large = || {
            AppError::TooLarge(format!(
                "the request body is over {limit_bytes} bytes, the most this request may send"
            ))
        };
        if declared_length(parts).is_some_and(|n| n > limit_bytes as u64) {
            return Err(too_large());
        }
        let deadline = self.body_timeout;
        let read = async {
            let mut body = body;
            let mut bytes: Vec<u8> = Vec::new();
            let mut held: Option<OwnedSemaphorePermit> = None;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    AppError::BadRequest(format!("the request body could not be read: {e}"))
                })?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if bytes.len() + data.len() > limit_bytes {
                    return Err(too_large());
                }
                if data.is_empty() {
                    continue;
                }
                let n = data.len();
                spend.body_bytes(n, metrics)?;
                let permits = u32::try_from(n).unwrap_or(u32::MAX);
                let Some(permit) = wait_for(&self.body_bytes, permits, self.queue_timeout).await
                else {
                    return Err(busy());
                };
                match held.as_mut() {
                    Some(held) => held.merge(permit),
                    None => held = Some(permit),
                }
                bytes.extend_from_slice(&data);
            }
            Ok((Bytes::from(bytes), held))
        };
        match tokio::time::timeout(deadline, read).await {
            Ok(read) => read,
            Err(_) => Err(AppError::TimedOut(format!(
                "the request body did not arrive within {} s",
                deadline.as_secs()
            ))),
        }
    }
}

fn declared_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}
