//! What a form that did its work leaves for the page it redirects to (post/redirect/get): kept
//! in the session under the page's own key, and shown once.

use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tower_sessions::Session;

use super::error::PageError;
use crate::error::{AppError, AppResult};

/// Leaves `value` under `key` and redirects to `to` (303), so that reloading the page there does
/// not send the form again.
pub async fn redirect<T: Serialize + Send + Sync>(
    session: &Session,
    key: &str,
    value: T,
    to: &str,
) -> Result<Response, PageError> {
    session.insert(key, value).await.map_err(AppError::from)?;
    Ok(Redirect::to(to).into_response())
}

/// What the last form left under `key`, taken away so that it shows once.
pub async fn take<T: DeserializeOwned>(session: &Session, key: &str) -> AppResult<Option<T>> {
    Ok(session.remove(key).await?)
}
