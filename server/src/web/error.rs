//! An error shown as a page rather than as JSON, and the answer to a path that does not exist.

use askama::Template;
use axum::response::{IntoResponse, Response};

use super::frame::Frame;
use crate::error::AppError;

/// An error shown as a page rather than as JSON.
pub struct PageError(AppError);

impl From<AppError> for PageError {
    fn from(e: AppError) -> Self {
        PageError(e)
    }
}

impl From<crate::db::StoreError> for PageError {
    fn from(e: crate::db::StoreError) -> Self {
        PageError(e.into())
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    frame: Frame,
    status: u16,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage {
            frame: Frame::default(),
            status: status.as_u16(),
            message: self.0.public_message(),
        };
        match page.render() {
            Ok(html) => (status, axum::response::Html(html)).into_response(),
            Err(_) => (status, self.0.public_message()).into_response(),
        }
    }
}

/// For requests to paths that do not exist: JSON under `/api/`, a page elsewhere.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let error = AppError::NotFound(format!("There is nothing at {}.", uri.path()));
    if uri.path().starts_with("/api/") {
        error.into_response()
    } else {
        PageError(error).into_response()
    }
}
