//! `/login` and `/logout`.

use askama::Template;
use askama_web::WebTemplate;
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::error::PageError;
use super::form::{BoundedForm, CsrfForm, FieldLimits, MAX_CSRF_CHARS, MAX_PASSWORD_CHARS};
use super::frame::Frame;
use crate::auth::throttle::password_fingerprint;
use crate::auth::{self, PageUser};
use crate::http::admission::Spend;
use crate::state::AppState;

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

/// The login form with a fresh CSRF token in its own cookie, and `status`.
fn login_page(
    state: &AppState,
    status: StatusCode,
    next: Option<&str>,
    name: String,
    error: &str,
) -> Result<Response, PageError> {
    let (token, cookie) = auth::login_csrf(state.options.secure_cookies)?;
    let mut frame = Frame::anonymous(state);
    frame.csrf = token;
    let page = LoginPage {
        frame,
        next: auth::safe_next(next).to_string(),
        name,
        error: error.to_string(),
    };
    Ok((status, [(header::SET_COOKIE, cookie)], page.into_response()).into_response())
}

pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<NextQuery>,
) -> Result<Response, PageError> {
    login_page(
        &state,
        StatusCode::OK,
        query.next.as_deref(),
        String::new(),
        "",
    )
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
    csrf: Option<String>,
}

/// Longest `next` (the page to return to): a path with its filters.
const MAX_NEXT_CHARS: usize = 2048;

impl FieldLimits for LoginForm {
    // A name longer than any user's is refused here, before the throttle or argon2 see it.
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("name", auth::MAX_USER_NAME_CHARS),
        ("password", MAX_PASSWORD_CHARS),
        ("next", MAX_NEXT_CHARS),
        ("csrf", MAX_CSRF_CHARS),
    ];
}

pub async fn submit(
    State(state): State<AppState>,
    session: Session,
    headers: HeaderMap,
    spend: Option<Extension<Spend>>,
    BoundedForm(form): BoundedForm<LoginForm>,
) -> Result<Response, PageError> {
    // A flood of wrong logins from one address writes its share of lines, not one each.
    let sender = spend.map(|s| s.credential());
    auth::check_login_csrf(&headers, form.csrf.as_deref())?;
    let name = form.name.trim().to_string();
    let user = state.db.user_by_name(&name).await?;
    let password = password_fingerprint(user.as_ref().map(|u| u.password_hash.as_str()));
    // The attempt takes its place before the password is checked: attempts that arrive together
    // count as they would one after another.
    let attempt = match state
        .login_throttle
        .attempt(&name, password, state.clock.now_ms())
    {
        Ok(attempt) => attempt,
        Err(wait_s) => {
            if let Some(held_back) = state.may_log(sender) {
                tracing::info!(name = ?name, wait_s, earlier_lines_held_back = held_back, "login held back after repeated failures");
            }
            let mut page = login_page(
                &state,
                StatusCode::TOO_MANY_REQUESTS,
                form.next.as_deref(),
                form.name,
                &format!("Too many failed logins for this name: try again in {wait_s} s."),
            )?;
            page.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(wait_s));
            return Ok(page);
        }
    };
    // An unknown name costs a hash check too: the time must not tell which names exist.
    let phc = user.as_ref().map(|u| u.password_hash.clone());
    let matches = auth::check_password(form.password, phc).await?;
    let Some(user) = user.filter(|_| matches) else {
        if let Some(held_back) = state.may_log(sender) {
            tracing::info!(name = ?name, earlier_lines_held_back = held_back, "login refused");
        }
        return login_page(
            &state,
            StatusCode::UNAUTHORIZED,
            form.next.as_deref(),
            form.name,
            "Unknown user or wrong password.",
        );
    };
    attempt.succeeded();
    auth::log_in(&session, user.id.0, &user.password_hash).await?;
    state.db.record_login(user.id, state.clock.now_ms()).await?;
    tracing::info!(user = ?user.name, "logged in");
    Ok(Redirect::to(auth::safe_next(form.next.as_deref())).into_response())
}

pub async fn logout(
    PageUser(user, session): PageUser,
    BoundedForm(form): BoundedForm<CsrfForm>,
) -> Result<Response, PageError> {
    auth::check_csrf(&session, form.csrf.as_deref()).await?;
    auth::log_out(&session).await?;
    tracing::info!(user = ?user.name, "logged out");
    Ok(Redirect::to("/login").into_response())
}
