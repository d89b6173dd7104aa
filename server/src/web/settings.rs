//! `/settings`, for admins: API tokens (create, shown once; revoke), dashboard users, and the
//! cost model. Every form is a POST with the session's CSRF token; a viewer is refused.

use askama::Template;
use askama_web::WebTemplate;
use axum::Form;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::frame::Frame;
use super::login::CsrfForm;
use super::pages::PageError;
use super::view;
use crate::analysis::cost::CostModel;
use crate::app::{AppState, now_ms};
use crate::auth::{self, PageUser, Role, User, UserRole};
use crate::error::{AppError, AppResult};

struct TokenLine {
    id: i64,
    name: String,
    role: String,
    bound_to: String,
    created: String,
    last_used: String,
    revoked: String,
}

struct UserLine {
    name: String,
    role: String,
    created: String,
    last_login: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "settings.html")]
pub struct SettingsPage {
    frame: Frame,
    /// A token just made, shown this once.
    new_token: String,
    new_token_name: String,
    /// What the last form did, or why it was refused.
    notice: String,
    error: String,
    tokens: Vec<TokenLine>,
    users: Vec<UserLine>,
    cost: CostModel,
}

async fn render(
    state: &AppState,
    user: &User,
    session: &Session,
    status: StatusCode,
    fill: impl FnOnce(&mut SettingsPage),
) -> Result<Response, PageError> {
    user.require_admin()?;
    let now = now_ms();
    let when = |ms: Option<i64>| ms.map_or("never".to_string(), |ms| view::ago(ms, now));
    let tokens = state
        .db
        .tokens()
        .await?
        .into_iter()
        .map(|t| TokenLine {
            id: t.id,
            name: t.name,
            role: t.role,
            bound_to: t
                .host_name
                .map(|h| format!("host {h}"))
                .or(t.guest_uuid.map(|u| format!("guest {u}")))
                .unwrap_or_default(),
            created: view::time(t.created_ms),
            last_used: when(t.last_used_ms),
            revoked: t.revoked_ms.map(view::time).unwrap_or_default(),
        })
        .collect();
    let users = state
        .db
        .users()
        .await?
        .into_iter()
        .map(|u| UserLine {
            name: u.name,
            role: u.role,
            created: view::time(u.created_ms),
            last_login: when(u.last_login_ms),
        })
        .collect();
    let mut page = SettingsPage {
        frame: Frame::new(state, user, session).await?,
        new_token: String::new(),
        new_token_name: String::new(),
        notice: String::new(),
        error: String::new(),
        tokens,
        users,
        cost: state.cost_model(),
    };
    fill(&mut page);
    let mut response = page.into_response();
    *response.status_mut() = status;
    Ok(response)
}

pub async fn page(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<Response, PageError> {
    render(&state, &user, &session, StatusCode::OK, |_| {}).await
}

/// A name or label typed into a form: trimmed, 1 to `max` characters, no control characters.
fn label(field: &str, value: &str, max: usize) -> AppResult<String> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(AppError::invalid(
            field,
            format!("must be 1 to {max} characters, without control characters"),
        ));
    }
    Ok(value.to_string())
}

/// Checks the caller is an admin and the form is this session's.
async fn admin_form(user: &User, session: &Session, csrf: Option<&str>) -> AppResult<()> {
    auth::check_csrf(session, csrf).await?;
    user.require_admin()
}

/// A refused form: the settings page again, saying why.
async fn refused(
    state: &AppState,
    user: &User,
    session: &Session,
    error: AppError,
) -> Result<Response, PageError> {
    if !matches!(error, AppError::Invalid { .. } | AppError::Conflict(_)) {
        return Err(error.into());
    }
    let status = error.status();
    let message = error.to_string();
    render(state, user, session, status, |p| p.error = message).await
}

#[derive(Deserialize)]
pub struct TokenForm {
    csrf: Option<String>,
    name: String,
    role: String,
    #[serde(default)]
    host: String,
}

pub async fn create_token(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    Form(form): Form<TokenForm>,
) -> Result<Response, PageError> {
    admin_form(&user, &session, form.csrf.as_deref()).await?;
    let made = async {
        let name = label("name", &form.name, 64)?;
        let role = Role::parse(&form.role)
            .ok_or_else(|| AppError::invalid("role", "must be agent, viewer or guest"))?;
        let host = match form.host.trim() {
            "" => None,
            host => Some(label("host", host, tickscope_agent::wire::MAX_NAME_CHARS)?),
        };
        if host.is_some() && role != Role::Agent {
            return Err(AppError::invalid(
                "host",
                "only an agent token reports for a host",
            ));
        }
        let token = auth::new_token()?;
        state
            .db
            .insert_token(
                &name,
                role.as_str(),
                &auth::token_hash(&token),
                host.as_deref(),
                now_ms(),
            )
            .await?;
        tracing::info!(admin = %user.name, token = %name, role = role.as_str(), "token created");
        Ok((name, token))
    }
    .await;
    match made {
        Ok((name, token)) => {
            render(&state, &user, &session, StatusCode::OK, |p| {
                p.new_token = token;
                p.new_token_name = name;
            })
            .await
        }
        Err(e) => refused(&state, &user, &session, e).await,
    }
}

pub async fn revoke_token(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    id: Result<Path<i64>, PathRejection>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, PageError> {
    admin_form(&user, &session, form.csrf.as_deref()).await?;
    let Path(id) = id.map_err(|_| AppError::NotFound("There is no such token.".into()))?;
    if !state.db.revoke_token(id, now_ms()).await? {
        return Err(
            AppError::NotFound("There is no such token, or it was revoked before.".into()).into(),
        );
    }
    tracing::info!(admin = %user.name, token = id, "token revoked");
    Ok(Redirect::to("/settings").into_response())
}

#[derive(Deserialize)]
pub struct UserForm {
    csrf: Option<String>,
    name: String,
    role: String,
    password: String,
}

pub async fn create_user(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    Form(form): Form<UserForm>,
) -> Result<Response, PageError> {
    admin_form(&user, &session, form.csrf.as_deref()).await?;
    let made = async {
        let name = auth::user_name(&form.name)?;
        let role = UserRole::parse(&form.role)
            .ok_or_else(|| AppError::invalid("role", "must be admin or viewer"))?;
        let hash = auth::hash_password_async(form.password).await?;
        state
            .db
            .insert_user(&name, role.as_str(), &hash, now_ms())
            .await?;
        tracing::info!(admin = %user.name, user = %name, role = role.as_str(), "user created");
        Ok(name)
    }
    .await;
    match made {
        Ok(name) => {
            render(&state, &user, &session, StatusCode::OK, |p| {
                p.notice = format!("User {name} added.");
            })
            .await
        }
        Err(e) => refused(&state, &user, &session, e).await,
    }
}

#[derive(Deserialize)]
pub struct CostForm {
    csrf: Option<String>,
    watts_per_busy_core: String,
    price_per_kwh: String,
    currency: String,
}

pub async fn save_cost(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    Form(form): Form<CostForm>,
) -> Result<Response, PageError> {
    admin_form(&user, &session, form.csrf.as_deref()).await?;
    let number = |field: &str, text: &str, max: f64| -> AppResult<f64> {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && (0.0..=max).contains(v))
            .ok_or_else(|| AppError::invalid(field, format!("must be a number from 0 to {max}")))
    };
    let model = (|| {
        Ok::<_, AppError>(CostModel {
            watts_per_busy_core: number("watts_per_busy_core", &form.watts_per_busy_core, 1000.0)?,
            price_per_kwh: number("price_per_kwh", &form.price_per_kwh, 100.0)?,
            currency: label("currency", &form.currency, 8)?,
        })
    })();
    match model {
        Ok(model) => {
            state.set_cost_model(model, &user.name).await?;
            tracing::info!(admin = %user.name, "cost model saved");
            render(&state, &user, &session, StatusCode::OK, |p| {
                p.notice = "Cost model saved: every figure now uses it.".into();
            })
            .await
        }
        Err(e) => refused(&state, &user, &session, e).await,
    }
}
