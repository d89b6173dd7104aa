//! `/account`: the logged-in user's own account, where they change their password.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::PageError;
use super::flash::{self, Back, NoticePage, Said};
use super::form::{BoundedForm, FieldLimits, MAX_CSRF_CHARS, MAX_PASSWORD_CHARS};
use super::frame::Frame;
use crate::auth::throttle::password_fingerprint;
use crate::auth::{self, PageUser};
use crate::error::AppError;
use crate::state::AppState;

#[derive(Template, WebTemplate)]
#[template(path = "account.html")]
pub struct AccountPage {
    frame: Frame,
    min_chars: usize,
    notice: String,
    error: String,
}

const BACK: Back = Back {
    key: "account_notice",
    path: "/account",
};

impl NoticePage for AccountPage {
    const BACK: Back = BACK;

    async fn render(_: &AppState, frame: Frame, said: Said) -> Result<Response, PageError> {
        let page = AccountPage {
            frame,
            min_chars: auth::MIN_PASSWORD_CHARS,
            notice: said.notice,
            error: said.error,
        };
        Ok((said.status, page).into_response())
    }
}

#[derive(Deserialize)]
pub struct PasswordChange {
    csrf: Option<String>,
    current: String,
    password: String,
    again: String,
}

impl FieldLimits for PasswordChange {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("current", MAX_PASSWORD_CHARS),
        ("password", MAX_PASSWORD_CHARS),
        ("again", MAX_PASSWORD_CHARS),
    ];
}

/// Changes the user's own password once they proved the current one; their other sessions end
/// (they were opened with the old password), this one is opened again with the new. Wrong
/// current passwords are throttled like failed logins, under the same name: a stolen session
/// must not become a way to guess the password faster than the login form allows.
pub async fn change_password(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    BoundedForm(form): BoundedForm<PasswordChange>,
) -> Result<Response, PageError> {
    auth::check_csrf(&session, form.csrf.as_deref()).await?;
    let changed = async {
        let row = state
            .db
            .user_by_id(crate::domain::UserId(user.id))
            .await?
            .ok_or_else(|| AppError::NotFound("there is no such user".into()))?;
        let password = password_fingerprint(Some(&row.password_hash));
        let attempt = match state.login_throttle.attempt(&row.name, password, state.clock.now_ms()) {
            Ok(attempt) => attempt,
            Err(wait_s) => {
                tracing::info!(user = ?row.name, wait_s, "password change held back after wrong current passwords");
                return Err(AppError::TooManyRequests {
                    message: format!(
                        "Too many wrong current passwords: try again in {wait_s} s."
                    ),
                    retry_after_s: wait_s.unsigned_abs(),
                });
            }
        };
        if !auth::check_password(form.current, Some(row.password_hash)).await? {
            tracing::info!(user = ?row.name, "password change refused: wrong current password");
            return Err(AppError::invalid("current", "is not your current password"));
        }
        attempt.succeeded();
        if form.password != form.again {
            return Err(AppError::invalid("again", "differs from the new password"));
        }
        let hash = auth::hash_password_async(form.password).await?;
        state.db.set_password(crate::domain::UserId(user.id),&hash).await?;
        auth::log_in(&session, user.id, &hash).await?;
        Ok(())
    }
    .await;
    match changed {
        Ok(()) => {
            tracing::info!(user = ?user.name, "password changed");
            let notice = "Password changed. Your other sessions are logged out.";
            flash::redirect(&session, BACK.key, notice, BACK.path).await
        }
        Err(e @ AppError::Invalid { .. }) => {
            let said = Said::refusal(e.status(), e.to_string());
            <AccountPage as NoticePage>::render(
                &state,
                Frame::new(&state, &user, &session).await?,
                said,
            )
            .await
        }
        Err(AppError::TooManyRequests {
            message,
            retry_after_s,
        }) => {
            let said = Said::refusal(StatusCode::TOO_MANY_REQUESTS, message);
            let mut page = <AccountPage as NoticePage>::render(
                &state,
                Frame::new(&state, &user, &session).await?,
                said,
            )
            .await?;
            page.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(retry_after_s),
            );
            Ok(page)
        }
        Err(e) => Err(e.into()),
    }
}
