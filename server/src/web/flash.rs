//! What a form that did its work leaves for the page it redirects to (post/redirect/get): kept
//! in the session under the page's own key, and shown once.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tower_sessions::Session;

use super::error::PageError;
use super::frame::Frame;
use crate::auth::{PageUser, User};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

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

/// A page that forms send back to, and the session key it finds what they did under.
pub struct Back {
    pub key: &'static str,
    pub path: &'static str,
}

impl Back {
    /// After a form did its work: back to the page at `#anchor`, which shows `value` once.
    pub async fn done<T: Serialize + Send + Sync>(
        &self,
        session: &Session,
        value: T,
        anchor: &str,
    ) -> Result<Response, PageError> {
        redirect(session, self.key, value, &format!("{}#{anchor}", self.path)).await
    }
}

/// What a [`NoticePage`] says above its content, and the status it answers with.
pub struct Said {
    pub status: StatusCode,
    pub notice: String,
    pub error: String,
}

impl Said {
    /// The notice the last form left, if any (200).
    pub fn notice(notice: String) -> Said {
        Said {
            status: StatusCode::OK,
            notice,
            error: String::new(),
        }
    }

    /// Why a form was refused, answered with `status`.
    pub fn refusal(status: StatusCode, error: String) -> Said {
        Said {
            status,
            notice: String::new(),
            error,
        }
    }
}

/// A page that shows, once, the notice the last form left for it, and else renders itself with
/// a status and a notice or an error.
pub trait NoticePage {
    const BACK: Back;

    /// The page in `frame` (who looks at it), saying what `said` says.
    fn render(
        state: &AppState,
        frame: Frame,
        said: Said,
    ) -> impl Future<Output = Result<Response, PageError>> + Send;
}

/// The GET of a [`NoticePage`], with what the last form left for it, if anything.
pub async fn page<P: NoticePage>(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<Response, PageError> {
    let notice: String = take(&session, P::BACK.key).await?.unwrap_or_default();
    let frame = Frame::new(&state, &user, &session).await?;
    P::render(&state, frame, Said::notice(notice)).await
}

/// What a form on a [`NoticePage`] answers: when it did its work, back to the page at
/// `#anchor`, which shows `outcome`'s notice once; when refused for what was typed (invalid, or
/// in conflict with what is stored), the page again with that status and why, so the admin sees
/// it beside the form; any other error is the error page.
pub async fn finish<P: NoticePage>(
    state: &AppState,
    user: &User,
    session: &Session,
    outcome: AppResult<String>,
    anchor: &str,
) -> Result<Response, PageError> {
    match outcome {
        Ok(notice) => P::BACK.done(session, notice, anchor).await,
        Err(e @ (AppError::Invalid { .. } | AppError::Conflict(_))) => {
            let frame = Frame::new(state, user, session).await?;
            P::render(state, frame, Said::refusal(e.status(), e.to_string())).await
        }
        Err(e) => Err(e.into()),
    }
}
