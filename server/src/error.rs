//! The server's one error type, and how it reaches a client.
//!
//! API errors are JSON: `{"error": {"code": "...", "message": "...", "field": "..."}}`. Details
//! of internal failures are logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::db::error::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    TooLarge(String),
    /// The request clashes with what exists (a user name already taken).
    #[error("{0}")]
    Conflict(String),
    /// The caller sends faster than it may; it may try again after `retry_after_s`.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_s: u64 },
    /// The server cannot store anything now (its disk is full): nothing was written; the caller
    /// keeps what it sent and tries again later.
    #[error("{message}")]
    StorageFull { message: String, retry_after_s: u64 },
    /// The server cannot serve this now (the database cannot be written, or every request slot
    /// is taken): nothing was written; try again after `retry_after_s`.
    #[error("{message}")]
    Unavailable { message: String, retry_after_s: u64 },
    /// Every request slot of the caller's kind is taken: nothing was done; try again after
    /// `retry_after_s`. Not logged: under a flood there would be a line per request.
    #[error("{message}")]
    Busy { message: String, retry_after_s: u64 },
    /// The client took longer than it may to send its request.
    #[error("{0}")]
    TimedOut(String),
    /// A value in a request is not acceptable; `field` names it (`guests[2].vcpus`).
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// Storage failed for a reason of its own (not a full disk, not a database that cannot be
    /// written now): the server's problem.
    #[error("{0}")]
    Database(StoreError),
    #[error("{0}")]
    Internal(String),
    /// Writing a value out (JSON, CSV, YAML, the metrics text) failed: the server's problem.
    #[error("{what}: {source}")]
    Encode {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Work the request waited on, off the async threads, stopped before it answered.
    #[error("{what} stopped: {source}")]
    Stopped {
        what: &'static str,
        source: tokio::task::JoinError,
    },
    /// The OS gave no randomness for a token or a session.
    #[error("no randomness from the OS: {0}")]
    NoRandomness(getrandom::Error),
    /// The request body is not sent as the media type the endpoint reads (`application/json`).
    #[error("{0}")]
    UnsupportedMediaType(String),
}

impl AppError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        AppError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Writing `what` out failed.
    pub fn encode(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        AppError::Encode {
            what,
            source: Box::new(e),
        }
    }

    /// The task doing `what` stopped.
    pub fn stopped(what: &'static str, source: tokio::task::JoinError) -> Self {
        AppError::Stopped { what, source }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::StorageFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
            AppError::Unavailable { .. } | AppError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Database(_)
            | AppError::Internal(_)
            | AppError::Encode { .. }
            | AppError::Stopped { .. }
            | AppError::NoRandomness(_) => StatusCode::INTERNAL_SERVER_ERROR,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::Unauthorized(_) => "unauthorized",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound(_) => "not_found",
            AppError::BadRequest(_) => "bad_request",
            AppError::TooLarge(_) => "too_large",
            AppError::Conflict(_) => "conflict",
            AppError::TooManyRequests { .. } => "too_many_requests",
            AppError::StorageFull { .. } => "storage_full",
            AppError::Unavailable { .. } | AppError::Busy { .. } => "unavailable",
            AppError::TimedOut(_) => "timeout",
            AppError::Invalid { .. } => "invalid",
            AppError::Database(_)
            | AppError::Internal(_)
            | AppError::Encode { .. }
            | AppError::Stopped { .. }
            | AppError::NoRandomness(_) => "internal",
            AppError::UnsupportedMediaType(_) => "unsupported_media_type",
        }
    }

    /// How long the caller should wait before sending again, for answers that say so.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            AppError::TooManyRequests { retry_after_s, .. }
            | AppError::StorageFull { retry_after_s, .. }
            | AppError::Unavailable { retry_after_s, .. }
            | AppError::Busy { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }

    /// The message a client may see: internal details stay in the log.
    pub fn public_message(&self) -> String {
        if let AppError::Busy { .. } = self {
            self.to_string()
        } else if let AppError::StorageFull { .. } | AppError::Unavailable { .. } = self {
            // Written for the caller, and worth a line in the log: it is the server's problem.
            tracing::warn!(error = %self, "request refused for now");
            self.to_string()
        } else if self.status().is_server_error() {
            tracing::error!(error = %self, "request failed");
            "internal error; the server log has the details".to_string()
        } else {
            self.to_string()
        }
    }
}

/// The body of every API error, as the OpenAPI document describes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// `unauthorized`, `forbidden`, `not_found`, `bad_request`, `too_large`, `conflict`,
    /// `too_many_requests`, `invalid`, `unsupported_media_type`, `storage_full`, `unavailable`,
    /// `timeout` or `internal`.
    pub code: &'static str,
    pub message: String,
    /// The request value that was refused (`guests[2].vcpus`), for `invalid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.public_message(),
                field: match &self {
                    AppError::Invalid { field, .. } => Some(field.clone()),
                    _ => None,
                },
            },
        };
        let mut response = (self.status(), Json(body)).into_response();
        if let AppError::Unauthorized(_) = self {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(retry_after_s) = self.retry_after_s() {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(retry_after_s),
            );
        }
        response
    }
}

/// Storage's answers as the client sees them: a full disk or a database that cannot be written
/// now are answered "retry later" with what went wrong; a missing row, a clash or a refused
/// binding are the caller's; every other storage error is the server's, and stays in its log.
impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(message) => AppError::NotFound(message),
            StoreError::Conflict(message) => AppError::Conflict(message),
            StoreError::Refused(message) => AppError::Forbidden(message),
            StoreError::Full(e) => AppError::StorageFull {
                message: format!(
                    "the server's disk is full, so nothing was stored; keep the data and retry later ({e})"
                ),
                retry_after_s: STORAGE_RETRY_AFTER_S,
            },
            StoreError::Unavailable(e) => AppError::Unavailable {
                message: format!(
                    "the server cannot write its database now, so nothing was stored; retry later ({e})"
                ),
                retry_after_s: STORAGE_RETRY_AFTER_S,
            },
            StoreError::Corrupt(message) => AppError::Internal(message),
            e @ (StoreError::Backend(_) | StoreError::Migrate(_)) => AppError::Database(e),
        }
    }
}

/// Agents wait at least this long after a storage fault (they keep their reports in their spool);
/// long enough for an admin to free space, short enough to catch up soon after.
pub const STORAGE_RETRY_AFTER_S: u64 = 30;

/// The session store is the database: its failures are the server's, not the visitor's.
impl From<tower_sessions::session::Error> for AppError {
    fn from(e: tower_sessions::session::Error) -> Self {
        AppError::Internal(format!("session store: {e}"))
    }
}

pub type AppResult<T> = Result<T, AppError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Storage's errors reach a client with the statuses, codes and messages they had when
    /// storage returned `AppError` itself.
    #[test]
    fn storage_errors_keep_their_http_answers() {
        let sqlx_error = || sqlx::Error::Protocol("the detail".into());
        let cases: [(StoreError, StatusCode, &str, &str, Option<u64>); 7] = [
            (
                StoreError::NotFound("there is no such rule".into()),
                StatusCode::NOT_FOUND,
                "not_found",
                "there is no such rule",
                None,
            ),
            (
                StoreError::Conflict("there is already a user \"ada\"".into()),
                StatusCode::CONFLICT,
                "conflict",
                "there is already a user \"ada\"",
                None,
            ),
            (
                StoreError::Refused("this agent token reports for host \"a\"".into()),
                StatusCode::FORBIDDEN,
                "forbidden",
                "this agent token reports for host \"a\"",
                None,
            ),
            (
                StoreError::Full(sqlx_error()),
                StatusCode::INSUFFICIENT_STORAGE,
                "storage_full",
                "the server's disk is full, so nothing was stored; keep the data and retry later (encountered unexpected or invalid data: the detail)",
                Some(STORAGE_RETRY_AFTER_S),
            ),
            (
                StoreError::Unavailable(sqlx_error()),
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the server cannot write its database now, so nothing was stored; retry later (encountered unexpected or invalid data: the detail)",
                Some(STORAGE_RETRY_AFTER_S),
            ),
            (
                StoreError::Backend(sqlx_error()),
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "database error: encountered unexpected or invalid data: the detail",
                None,
            ),
            (
                StoreError::Corrupt("unreadable packed sample".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "unreadable packed sample",
                None,
            ),
        ];
        for (store_error, status, code, message, retry_after_s) in cases {
            let case = format!("{store_error:?}");
            let e = AppError::from(store_error);
            assert_eq!(e.status(), status, "{case}");
            assert_eq!(e.code(), code, "{case}");
            assert_eq!(e.to_string(), message, "{case}");
            assert_eq!(e.retry_after_s(), retry_after_s, "{case}");
        }
    }

    /// A failure of the server's own (writing JSON out, a task that stopped, no randomness)
    /// answers 500 `internal` and keeps its details for the log.
    #[tokio::test]
    async fn the_servers_own_failures_answer_500_without_their_details() {
        let json_error = serde_json::from_str::<u8>("x").unwrap_err();
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        let stopped = task.await.unwrap_err();
        let cases = [
            AppError::encode("a CSV export", json_error),
            AppError::stopped("a notification task", stopped),
            AppError::Internal("the detail".into()),
        ];
        for e in cases {
            assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR, "{e}");
            assert_eq!(e.code(), "internal", "{e}");
            assert_eq!(
                e.public_message(),
                "internal error; the server log has the details",
                "{e}"
            );
        }
    }
}
