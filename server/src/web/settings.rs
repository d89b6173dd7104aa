//! `/settings`, for admins: API tokens (create, shown once; revoke), dashboard users (add,
//! change role, set a new password, remove), and the cost model. Every form is a POST with the
//! session's CSRF token; a viewer is refused. A form that did its work redirects back to the
//! page (post/redirect/get), so reloading the page never submits it again; what it did is shown
//! once from the session.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

use super::error::PageError;
use super::extract::{Admin, AdminForm};
use super::flash::{self, Back};
use super::form::csrf_field;
use super::form::{
    CsrfForm, FieldLimits, MAX_CHOICE_CHARS, MAX_CSRF_CHARS, MAX_NUMBER_CHARS, MAX_PASSWORD_CHARS,
    label, number,
};
use super::frame::Frame;
use super::view;
use crate::analysis::cost::CostModel;
use crate::auth::{self, Role, User, UserRole};
use crate::error::{AppError, AppResult};
use crate::state::AppState;

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
    id: i64,
    name: String,
    role: String,
    created: String,
    last_login: String,
    /// The admin looking at the page: changed on the account page, not here.
    is_you: bool,
}

/// What the last form did, carried in the session across its redirect and shown once.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Flash {
    notice: String,
    /// The ticket of a token just made, kept in the server's memory (`auth::NewTokens`), never
    /// in the session store.
    new_token_ticket: String,
}

const BACK: Back = Back {
    key: "settings_flash",
    path: "/settings",
};

fn notice(text: String) -> Flash {
    Flash {
        notice: text,
        ..Flash::default()
    }
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
    let now = state.clock.now_ms();
    let when = |ms: Option<i64>| ms.map_or("never".to_string(), |ms| view::ago(ms, now));
    let tokens = state
        .db
        .tokens()
        .await?
        .into_iter()
        .map(|t| TokenLine {
            id: t.id.0,
            name: t.name,
            role: t.role.to_string(),
            bound_to: match (t.role, t.guest_uuid, t.host_name) {
                (Role::Guest, Some(u), Some(h)) => format!("guest {u} on host {h}"),
                (Role::Guest, Some(u), None) => format!("guest {u}"),
                (_, _, Some(h)) => format!("host {h}"),
                _ => String::new(),
            },
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
            is_you: u.id.0 == user.id,
            id: u.id.0,
            name: u.name,
            role: u.role.to_string(),
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
    Admin(user, session): Admin,
) -> Result<Response, PageError> {
    let done: Flash = flash::take(&session, BACK.key).await?.unwrap_or_default();
    let new_token = state
        .new_tokens
        .take(&done.new_token_ticket, state.clock.now_ms());
    render(&state, &user, &session, StatusCode::OK, |p| {
        p.notice = done.notice;
        if let Some((token, name)) = new_token {
            p.new_token = token;
            p.new_token_name = name;
        }
    })
    .await
}

/// What a form on this page answers: when it did its work, back to the page at `#anchor`,
/// which shows `outcome` once; when refused for what was typed (invalid, or in conflict with
/// what is stored), the page again with that status and why; any other error is the error page.
async fn answer(
    state: &AppState,
    user: &User,
    session: &Session,
    outcome: AppResult<Flash>,
    anchor: &str,
) -> Result<Response, PageError> {
    match outcome {
        Ok(flash) => BACK.done(session, flash, anchor).await,
        Err(e @ (AppError::Invalid { .. } | AppError::Conflict(_))) => {
            let status = e.status();
            let message = e.to_string();
            render(state, user, session, status, |p| p.error = message).await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
pub struct TokenForm {
    csrf: Option<String>,
    name: String,
    role: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    guest_uuid: String,
}

/// Longest token name, in characters.
const MAX_TOKEN_NAME_CHARS: usize = 64;
/// Longest currency, in characters (`EUR`, `USD`, `CHF`, or a symbol).
const MAX_CURRENCY_CHARS: usize = 8;

impl FieldLimits for TokenForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("name", MAX_TOKEN_NAME_CHARS),
        ("role", MAX_CHOICE_CHARS),
        ("host", tickscope_wire::MAX_NAME_CHARS),
        ("guest_uuid", 64),
    ];
}

pub async fn create_token(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<TokenForm>,
) -> Result<Response, PageError> {
    let made = async {
        let name = label("name", &form.name, MAX_TOKEN_NAME_CHARS)?;
        let role = Role::parse(&form.role)
            .ok_or_else(|| AppError::invalid("role", "must be agent, viewer or guest"))?;
        let host = match form.host.trim() {
            "" => None,
            host => Some(label("host", host, tickscope_wire::MAX_NAME_CHARS)?),
        };
        let guest_uuid = match form.guest_uuid.trim() {
            "" => None,
            uuid => Some(
                tickscope_wire::normalise_uuid(uuid)
                    .ok_or_else(|| AppError::invalid("guest_uuid", "is not a UUID"))?,
            ),
        };
        match role {
            Role::Agent if guest_uuid.is_some() => {
                return Err(AppError::invalid(
                    "guest_uuid",
                    "only a guest token delivers for a VM",
                ));
            }
            Role::Guest if host.is_some() && guest_uuid.is_none() => {
                return Err(AppError::invalid(
                    "guest_uuid",
                    "a guest token is pinned to a host with its VM's UUID: give both",
                ));
            }
            Role::Viewer if host.is_some() || guest_uuid.is_some() => {
                return Err(AppError::invalid(
                    "host",
                    "a viewer token reads; it is bound to no host or VM",
                ));
            }
            _ => {}
        }
        let token = auth::new_token()?;
        let id = state
            .db
            .insert_token(
                &name,
                role,
                &auth::token_hash(&token),
                host.as_deref().filter(|_| role == Role::Agent),
                state.clock.now_ms(),
            )
            .await?;
        if let Some(uuid) = &guest_uuid {
            state.db.pin_guest_token(id, uuid, host.as_deref()).await?;
        }
        tracing::info!(admin = ?user.name, token = ?name, role = role.as_str(), "token created");
        Ok(Flash {
            new_token_ticket: state.new_tokens.keep(token, name, state.clock.now_ms())?,
            ..Flash::default()
        })
    }
    .await;
    answer(&state, &user, &session, made, "tokens").await
}

pub async fn revoke_token(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let Path(id) = id.map_err(|_| AppError::NotFound("There is no such token.".into()))?;
    if !state
        .db
        .revoke_token(crate::domain::TokenId(id), state.clock.now_ms())
        .await?
    {
        return Err(
            AppError::NotFound("There is no such token, or it was revoked before.".into()).into(),
        );
    }
    // This server stops taking it at once (others on the database within seconds).
    state.admission.forget_token(crate::domain::TokenId(id));
    tracing::info!(admin = ?user.name, token = id, "token revoked");
    BACK.done(
        &session,
        notice("Token revoked: it is refused from now on.".into()),
        "tokens",
    )
    .await
}

#[derive(Deserialize)]
pub struct UserForm {
    csrf: Option<String>,
    name: String,
    role: String,
    password: String,
}

impl FieldLimits for UserForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("name", auth::MAX_USER_NAME_CHARS),
        ("role", MAX_CHOICE_CHARS),
        ("password", MAX_PASSWORD_CHARS),
    ];
}

pub async fn create_user(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<UserForm>,
) -> Result<Response, PageError> {
    let made = async {
        let name = auth::user_name(&form.name)?;
        let role = UserRole::parse(&form.role)
            .ok_or_else(|| AppError::invalid("role", "must be admin or viewer"))?;
        let hash = auth::hash_password_async(form.password).await?;
        state
            .db
            .insert_user(&name, role, &hash, state.clock.now_ms())
            .await?;
        tracing::info!(admin = ?user.name, user = ?name, role = role.as_str(), "user created");
        Ok(notice(format!("User {name} added.")))
    }
    .await;
    answer(&state, &user, &session, made, "users").await
}

#[derive(Deserialize)]
pub struct CostForm {
    csrf: Option<String>,
    watts_per_busy_core: String,
    price_per_kwh: String,
    currency: String,
}

impl FieldLimits for CostForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("watts_per_busy_core", MAX_NUMBER_CHARS),
        ("price_per_kwh", MAX_NUMBER_CHARS),
        ("currency", MAX_CURRENCY_CHARS),
    ];
}

pub async fn save_cost(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<CostForm>,
) -> Result<Response, PageError> {
    let saved = async {
        let model = CostModel {
            watts_per_busy_core: number(
                "watts_per_busy_core",
                &form.watts_per_busy_core,
                0.0,
                1000.0,
            )?,
            price_per_kwh: number("price_per_kwh", &form.price_per_kwh, 0.0, 100.0)?,
            currency: label("currency", &form.currency, MAX_CURRENCY_CHARS)?,
        };
        state.set_cost_model(model, &user.name).await?;
        tracing::info!(admin = ?user.name, "cost model saved");
        Ok(notice("Cost model saved: every figure now uses it.".into()))
    }
    .await;
    answer(&state, &user, &session, saved, "cost").await
}

/// The user a per-user form is about: another one than the admin sending it (who changes their
/// own password on the account page, and cannot lock themselves out here).
async fn other_user(
    state: &AppState,
    user: &User,
    id: Result<Path<i64>, PathRejection>,
) -> AppResult<crate::db::UserRow> {
    let not_found = || AppError::NotFound("There is no such user.".into());
    let Path(id) = id.map_err(|_| not_found())?;
    let row = state
        .db
        .user_by_id(crate::domain::UserId(id))
        .await?
        .ok_or_else(not_found)?;
    if row.id.0 == user.id {
        return Err(AppError::Conflict(
            "change your own account on the account page; another admin can change your role or remove you".into(),
        ));
    }
    Ok(row)
}

#[derive(Deserialize)]
pub struct RoleForm {
    csrf: Option<String>,
    role: String,
}

impl FieldLimits for RoleForm {
    const MAX_CHARS: &'static [(&'static str, usize)] =
        &[("csrf", MAX_CSRF_CHARS), ("role", MAX_CHOICE_CHARS)];
}

pub async fn set_role(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, form): AdminForm<RoleForm>,
) -> Result<Response, PageError> {
    let changed = async {
        let other = other_user(&state, &user, id).await?;
        let role = UserRole::parse(&form.role)
            .ok_or_else(|| AppError::invalid("role", "must be admin or viewer"))?;
        state.db.set_role(other.id, role).await?;
        tracing::info!(admin = ?user.name, user = ?other.name, role = role.as_str(), "role changed");
        Ok(notice(format!("{} is now {}.", other.name, role.as_str())))
    }
    .await;
    answer(&state, &user, &session, changed, "users").await
}

#[derive(Deserialize)]
pub struct PasswordForm {
    csrf: Option<String>,
    password: String,
}

impl FieldLimits for PasswordForm {
    const MAX_CHARS: &'static [(&'static str, usize)] =
        &[("csrf", MAX_CSRF_CHARS), ("password", MAX_PASSWORD_CHARS)];
}

pub async fn set_password(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, form): AdminForm<PasswordForm>,
) -> Result<Response, PageError> {
    let changed = async {
        let other = other_user(&state, &user, id).await?;
        let hash = auth::hash_password_async(form.password).await?;
        state.db.set_password(other.id, &hash).await?;
        tracing::info!(admin = ?user.name, user = ?other.name, "password set by an admin");
        Ok(notice(format!(
            "New password set for {}; their open sessions are logged out.",
            other.name
        )))
    }
    .await;
    answer(&state, &user, &session, changed, "users").await
}

pub async fn remove_user(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let removed = async {
        let other = other_user(&state, &user, id).await?;
        state.db.delete_user(other.id).await?;
        tracing::info!(admin = ?user.name, user = ?other.name, "user removed");
        Ok(notice(format!(
            "User {} removed and logged out.",
            other.name
        )))
    }
    .await;
    answer(&state, &user, &session, removed, "users").await
}

csrf_field!(TokenForm, UserForm, CostForm, RoleForm, PasswordForm);
