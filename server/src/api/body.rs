//! A JSON request body read into its type, with the API's own answers for what does not fit.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;

use crate::error::{AppError, AppResult};

/// A JSON request body, or our own error for it: well-formed JSON of the wrong shape is 422
/// naming the body, a body over `limit_bytes` is 413, a body not sent as `application/json` is
/// 415, anything else 400.
pub(crate) fn json_body<T>(
    body: Result<Json<T>, JsonRejection>,
    limit_bytes: usize,
) -> AppResult<T> {
    body.map(|Json(value)| value).map_err(|e| match e {
        JsonRejection::JsonDataError(e) => AppError::invalid("body", e.body_text()),
        JsonRejection::MissingJsonContentType(e) => AppError::UnsupportedMediaType(e.body_text()),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => AppError::TooLarge(format!(
            "a request body may be at most {} KiB",
            limit_bytes / 1024
        )),
        other => AppError::BadRequest(other.body_text()),
    })
}

/// A JSON body already read, with what axum's `Json` extractor would have said of it: 415 when
/// it is not sent as JSON (`application/json`, or a `+json` type). For bodies parsed off the
/// async threads (a report of thousands of guests is milliseconds of CPU).
pub(crate) fn json_of<T: serde::de::DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    bytes: &[u8],
) -> Result<Json<T>, JsonRejection> {
    let json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| mime.trim().to_ascii_lowercase())
        .is_some_and(|mime| {
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        });
    if !json {
        return Err(JsonRejection::MissingJsonContentType(Default::default()));
    }
    Json::from_bytes(bytes)
}
