//! The silences of `/alerts`: added for a rule or any, for a guest or host name pattern, for
//! some hours; ended early.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;

use super::page::{AlertsPage, BACK, MAX_PATTERN_CHARS, id_of};
use crate::domain::{RuleId, SilenceId};
use crate::error::AppError;
use crate::state::AppState;
use crate::web::error::PageError;
use crate::web::extract::AdminForm;
use crate::web::flash::finish;
use crate::web::form::{
    CsrfForm, FieldLimits, MAX_CSRF_CHARS, MAX_NUMBER_CHARS, csrf_field, label, number,
};
use crate::web::view;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts/silences", post(create_silence))
        .route("/alerts/silences/{id}/expire", post(expire_silence))
}

#[derive(Deserialize)]
pub struct SilenceForm {
    csrf: Option<String>,
    #[serde(default)]
    rule_id: String,
    #[serde(default)]
    pattern: String,
    hours: String,
    reason: String,
}

impl FieldLimits for SilenceForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("rule_id", MAX_NUMBER_CHARS),
        ("pattern", MAX_PATTERN_CHARS),
        ("hours", MAX_NUMBER_CHARS),
        ("reason", MAX_PATTERN_CHARS),
    ];
}

async fn create_silence(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<SilenceForm>,
) -> Result<Response, PageError> {
    let made = async {
        let rule_id = match form.rule_id.trim() {
            "" => None,
            id => {
                let rules = state.db.alert_rules().await?;
                let id = id
                    .parse::<i64>()
                    .ok()
                    .filter(|id| rules.iter().any(|r| r.id.0 == *id))
                    .ok_or_else(|| AppError::invalid("rule_id", "is not a rule"))?;
                Some(id)
            }
        };
        let pattern = match form.pattern.trim() {
            "" => String::new(),
            p => label("pattern", p, MAX_PATTERN_CHARS)?,
        };
        let hours = number("hours", &form.hours, 0.1, 24.0 * 90.0)?;
        let reason = label("reason", &form.reason, MAX_PATTERN_CHARS)?;
        let now = state.clock.now_ms();
        let ends = now + (hours * 3_600_000.0) as i64;
        state
            .db
            .insert_silence(
                rule_id.map(RuleId),
                &pattern,
                now,
                ends,
                &reason,
                &user.name,
                now,
            )
            .await?;
        tracing::info!(admin = ?user.name, pattern = ?pattern, hours, "silence created");
        Ok(format!("Silenced until {}.", view::time(ends)))
    }
    .await;
    finish::<AlertsPage>(&state, &user, &session, made, "silences").await
}

async fn expire_silence(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "silence")?;
    if !state
        .db
        .expire_silence(SilenceId(id), state.clock.now_ms())
        .await?
    {
        return Err(AppError::NotFound("There is no such silence still running.".into()).into());
    }
    tracing::info!(admin = ?user.name, silence = id, "silence expired");
    BACK.done(&session, "Silence ended.".to_string(), "silences")
        .await
}

csrf_field!(SilenceForm);
