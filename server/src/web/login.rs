//! `/login` and `/logout`.

use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::frame::Frame;
use super::pages::PageError;
use crate::app::{AppState, now_ms};
use crate::auth::{self, PageUser};

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
pub struct LoginPage {
    frame: Frame,
    next: String,
    name: String,
    /// Why the last attempt failed; empty on a first visit.
    error: String,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

pub async fn page(
    State(state): State<AppState>,
    session: Session,
    Query(query): Query<NextQuery>,
) -> Result<LoginPage, PageError> {
    let mut frame = Frame::anonymous(&state);
    frame.csrf = auth::csrf_token(&session).await?;
    Ok(LoginPage {
        frame,
        next: auth::safe_next(query.next.as_deref()).to_string(),
        name: String::new(),
        error: String::new(),
    })
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
    csrf: Option<String>,
}

pub async fn submit(
    State(state): State<AppState>,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Result<Response, PageError> {
    auth::check_csrf(&session, form.csrf.as_deref()).await?;
    let user = state.db.user_by_name(form.name.trim()).await?;
    // Hashing runs on a blocking thread: argon2 takes tens of milliseconds of CPU on purpose.
    let password = form.password;
    let verified = match user {
        Some(user) => {
            let hash = user.password_hash.clone();
            tokio::task::spawn_blocking(move || auth::verify_password(&password, &hash))
                .await
                .unwrap_or(false)
                .then_some(user)
        }
        None => None,
    };
    let Some(user) = verified else {
        let mut frame = Frame::anonymous(&state);
        frame.csrf = auth::csrf_token(&session).await?;
        let page = LoginPage {
            frame,
            next: auth::safe_next(form.next.as_deref()).to_string(),
            name: form.name,
            error: "Unknown user or wrong password.".into(),
        };
        return Ok((StatusCode::UNAUTHORIZED, page).into_response());
    };
    auth::log_in(&session, user.id).await?;
    state.db.record_login(user.id, now_ms()).await?;
    tracing::info!(user = %user.name, "logged in");
    Ok(Redirect::to(auth::safe_next(form.next.as_deref())).into_response())
}

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: Option<String>,
}

pub async fn logout(
    PageUser(user, session): PageUser,
    Form(form): Form<CsrfForm>,
) -> Result<Response, PageError> {
    auth::check_csrf(&session, form.csrf.as_deref()).await?;
    auth::log_out(&session).await?;
    tracing::info!(user = %user.name, "logged out");
    Ok(Redirect::to("/login").into_response())
}
