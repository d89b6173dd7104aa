//! `/alerts` itself: what fires, what is pending, what fired before, and for admins the
//! acknowledgement of a firing alert; and what the page's forms share: their answer (back to
//! the page with a notice, or the page again with why the form was refused), the id in their
//! path, and the longest names and patterns they take.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::rows::{AlertLine, ReceiverLine, RuleLine, SilenceLine};
use crate::alerts::as_silences;

use crate::db::AlertRow;
use crate::domain::{AlertId, AlertState};
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::web::error::PageError;
use crate::web::extract::AdminForm;
use crate::web::flash::{self, Back, NoticePage, Said};
use crate::web::form::CsrfForm;
use crate::web::frame::Frame;
use crate::web::view;

/// Longest rule or receiver name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest silence pattern, rule scope value or silence reason, in characters.
pub const MAX_PATTERN_CHARS: usize = 256;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts", get(flash::page::<AlertsPage>))
        .route("/alerts/{id}/ack", post(acknowledge))
}

#[derive(Template, WebTemplate)]
#[template(path = "alerts.html")]
pub struct AlertsPage {
    frame: Frame,
    notice: String,
    error: String,
    firing: Vec<AlertLine>,
    pending: Vec<AlertLine>,
    history: Vec<AlertLine>,
    rules: Vec<RuleLine>,
    /// (id, name) of every rule, for the silence form.
    rule_choices: Vec<(i64, String)>,
    silences: Vec<SilenceLine>,
    receivers: Vec<ReceiverLine>,
    waiting: i64,
    delivered: i64,
    failed: i64,
    generated: String,
}

/// Where the page's forms send the admin back to, and the session key of their notice.
pub const BACK: Back = Back {
    key: "alerts_flash",
    path: "/alerts",
};

impl NoticePage for AlertsPage {
    const BACK: Back = BACK;

    async fn render(state: &AppState, frame: Frame, said: Said) -> Result<Response, PageError> {
        let now = state.clock.now_ms();
        let silence_rows = state.db.silences(now).await?;
        let in_force = as_silences(&silence_rows);
        let open = state.db.open_alerts().await?;
        let rules = state.db.alert_rules().await?;
        let line = |a: &AlertRow| AlertLine::new(a, &rules, &in_force, now);
        let counts = state.db.outbox_counts().await?;
        let page = AlertsPage {
            frame,
            notice: said.notice,
            error: said.error,
            firing: open
                .iter()
                .filter(|a| a.state == AlertState::Firing)
                .map(line)
                .collect(),
            pending: open
                .iter()
                .filter(|a| a.state == AlertState::Pending)
                .map(line)
                .collect(),
            history: state
                .db
                .resolved_alerts(50)
                .await?
                .iter()
                .map(line)
                .collect(),
            rule_choices: rules
                .iter()
                .map(|r| (r.id.0, r.settings.name.clone()))
                .collect(),
            silences: silence_rows
                .into_iter()
                .map(|s| SilenceLine::new(s, &rules))
                .collect(),
            rules: rules.iter().map(RuleLine::new).collect(),
            receivers: state
                .db
                .receivers()
                .await?
                .into_iter()
                .map(ReceiverLine::new)
                .collect(),
            waiting: counts.waiting,
            delivered: counts.delivered,
            failed: counts.failed,
            generated: view::time(now),
        };
        Ok((said.status, page).into_response())
    }
}

/// The id in a form's path; one that is not a number names nothing.
pub fn id_of(id: Result<Path<i64>, PathRejection>, what: &str) -> AppResult<i64> {
    id.map(|Path(id)| id)
        .map_err(|_| AppError::NotFound(format!("There is no such {what}.")))
}

/// An admin has seen a firing alert: who and when are shown with it.
async fn acknowledge(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "alert")?;
    if !state
        .db
        .acknowledge_alert(AlertId(id), &user.name, state.clock.now_ms())
        .await?
    {
        return Err(AppError::NotFound("There is no such open alert.".into()).into());
    }
    tracing::info!(admin = ?user.name, alert = id, "alert acknowledged");
    BACK.done(&session, "Alert acknowledged.".to_string(), "firing")
        .await
}

#[cfg(test)]
impl AlertsPage {
    /// The page with nothing on it around `frame`: what its forms offer.
    pub fn empty(frame: Frame) -> AlertsPage {
        AlertsPage {
            frame,
            notice: String::new(),
            error: String::new(),
            firing: vec![],
            pending: vec![],
            history: vec![],
            rules: vec![],
            rule_choices: vec![],
            silences: vec![],
            receivers: vec![],
            waiting: 0,
            delivered: 0,
            failed: 0,
            generated: String::new(),
        }
    }
}
