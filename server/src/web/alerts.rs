//! `/alerts`: what fires, what is pending, what is silenced, what fired before; and, for admins,
//! the rules, the silences and the webhook receivers. Forms redirect back (post/redirect/get).

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::error::PageError;
use super::extract::{Admin, AdminForm};
use super::flash::{Back, NoticePage};
use super::form::csrf_field;
use super::form::{
    CsrfForm, FieldLimits, MAX_CHOICE_CHARS, MAX_CSRF_CHARS, MAX_NUMBER_CHARS, label, number,
};
use super::frame::Frame;
use super::view;
use crate::alerts::client::Reach;
use crate::alerts::labels;
use crate::alerts::{RuleKind, Scope, as_silences};
use crate::analysis::alerting::{self, Silence};
use crate::auth::User;
use crate::db::{AlertRow, NewReceiver, NewRule, RuleRow};
use crate::domain::AlertState;
use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// An alert as a row of the page.
pub struct AlertLine {
    pub id: i64,
    pub rule: String,
    pub severity: String,
    /// `/guests/3` or `/hosts/1`.
    pub link: String,
    pub subject: String,
    pub host: String,
    pub state: String,
    pub value: String,
    /// Since when it is active (pending or firing), and for how long.
    pub since: String,
    pub lasted: String,
    pub fired: String,
    pub resolved: String,
    pub acked: String,
    pub silenced: bool,
}

impl AlertLine {
    /// `rules`: the stored rules, of which the alert's own gives the unit of its value (none if
    /// it was deleted since the alert was read).
    pub fn new(a: &AlertRow, rules: &[RuleRow], silences: &[Silence], now: i64) -> AlertLine {
        let unit = rules
            .iter()
            .find(|r| r.id == a.rule_id)
            .map_or("", |r| r.kind.unit());
        let end = a.resolved_ms.unwrap_or(now);
        AlertLine {
            id: a.id.0,
            rule: a.rule_name.clone(),
            severity: a.severity.clone(),
            link: format!("/{}s/{}", a.subject, a.subject_id),
            subject: a.subject_name.clone(),
            host: a.host_name.clone(),
            state: a.state.to_string(),
            value: format!("{:.2} {unit}", a.value).trim_end().to_string(),
            since: view::time(a.active_ms),
            lasted: view::duration(end - a.fired_ms.unwrap_or(a.active_ms)),
            fired: a.fired_ms.map(view::time).unwrap_or_default(),
            resolved: a.resolved_ms.map(view::time).unwrap_or_default(),
            acked: match (&a.acked_by, a.acked_ms) {
                (Some(by), Some(at)) => format!("{by}, {}", view::ago(at, now)),
                _ => String::new(),
            },
            silenced: a.state != AlertState::Resolved
                && alerting::silenced(silences, a.rule_id.0, &a.subject_name, &a.host_name, now),
        }
    }
}

pub struct RuleLine {
    pub id: i64,
    pub name: String,
    pub watches: String,
    pub scope: String,
    pub condition: String,
    pub severity: String,
    pub enabled: bool,
    pub updated: String,
}

impl RuleLine {
    fn new(r: &RuleRow) -> RuleLine {
        RuleLine {
            id: r.id.0,
            name: r.name.clone(),
            watches: r.kind.label().into(),
            scope: match r.scope.as_str() {
                "all" => "all".into(),
                scope => format!("{scope} {}", r.scope_value),
            },
            condition: format!(
                "≥ {} {} for {}",
                r.threshold,
                r.kind.unit(),
                view::duration(r.duration_s * 1000)
            ),
            severity: r.severity.clone(),
            enabled: r.enabled,
            // The rules a new database comes with were never changed by anyone.
            updated: if r.updated_ms == 0 {
                "built in".into()
            } else {
                format!("{}, by {}", view::time(r.updated_ms), r.updated_by)
            },
        }
    }
}

pub struct SilenceLine {
    id: i64,
    rule: String,
    pattern: String,
    from: String,
    until: String,
    reason: String,
    by: String,
}

pub struct ReceiverLine {
    id: i64,
    name: String,
    url: String,
    format: String,
    group_by: String,
    group_wait_s: i64,
    group_interval_s: i64,
    /// Whether an auth header is stored: the header itself is never shown back.
    auth_set: bool,
    ca_set: bool,
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

const BACK: Back = Back {
    key: "alerts_flash",
    path: "/alerts",
};

impl NoticePage for AlertsPage {
    const BACK: Back = BACK;

    async fn render(
        state: &AppState,
        user: &User,
        session: &Session,
        status: StatusCode,
        notice: String,
        error: String,
    ) -> Result<Response, PageError> {
        let now = state.clock.now_ms();
        let silence_rows = state.db.silences(now).await?;
        let in_force = as_silences(&silence_rows);
        let open = state.db.open_alerts().await?;
        let rules = state.db.alert_rules().await?;
        let line = |a: &AlertRow| AlertLine::new(a, &rules, &in_force, now);
        let rule_name = |id: Option<i64>| {
            id.map_or("any rule".to_string(), |id| {
                rules
                    .iter()
                    .find(|r| r.id.0 == id)
                    .map_or(format!("rule {id}"), |r| r.name.clone())
            })
        };
        let counts = state.db.outbox_counts().await?;
        let page = AlertsPage {
            frame: Frame::new(state, user, session).await?,
            notice,
            error,
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
            rule_choices: rules.iter().map(|r| (r.id.0, r.name.clone())).collect(),
            silences: silence_rows
                .into_iter()
                .map(|s| SilenceLine {
                    id: s.id.0,
                    rule: rule_name(s.rule_id.map(|r| r.0)),
                    pattern: if s.pattern.is_empty() {
                        "any guest or host".into()
                    } else {
                        s.pattern
                    },
                    from: view::time(s.starts_ms),
                    until: view::time(s.ends_ms),
                    reason: s.reason,
                    by: s.created_by,
                })
                .collect(),
            rules: rules.iter().map(RuleLine::new).collect(),
            receivers: state
                .db
                .receivers()
                .await?
                .into_iter()
                .map(|r| ReceiverLine {
                    id: r.id.0,
                    name: r.name,
                    url: r.url,
                    format: r.format,
                    group_by: labels::parse_group_by(&r.group_by).join(", "),
                    group_wait_s: r.group_wait_s,
                    group_interval_s: r.group_interval_s,
                    auth_set: r.auth_header.is_some(),
                    ca_set: r.ca_pem.is_some(),
                })
                .collect(),
            waiting: counts.waiting,
            delivered: counts.delivered,
            failed: counts.failed,
            generated: view::time(now),
        };
        Ok((status, page).into_response())
    }
}

/// A form that did its work, or the page again with why it was refused.
async fn finish(
    state: &AppState,
    user: &User,
    session: &Session,
    outcome: AppResult<String>,
    anchor: &str,
) -> Result<Response, PageError> {
    match outcome {
        Ok(notice) => BACK.done(session, notice, anchor).await,
        Err(e @ (AppError::Invalid { .. } | AppError::Conflict(_))) => {
            let status = e.status();
            <AlertsPage as NoticePage>::render(
                state,
                user,
                session,
                status,
                String::new(),
                e.to_string(),
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

fn id_of(id: Result<Path<i64>, PathRejection>, what: &str) -> AppResult<i64> {
    id.map(|Path(id)| id)
        .map_err(|_| AppError::NotFound(format!("There is no such {what}.")))
}

pub async fn acknowledge(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm { user, session, .. }: AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "alert")?;
    if !state
        .db
        .acknowledge_alert(crate::domain::AlertId(id), &user.name, state.clock.now_ms())
        .await?
    {
        return Err(AppError::NotFound("There is no such open alert.".into()).into());
    }
    tracing::info!(admin = ?user.name, alert = id, "alert acknowledged");
    BACK.done(&session, "Alert acknowledged.".to_string(), "firing")
        .await
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

/// Longest rule or receiver name, in characters.
const MAX_NAME_CHARS: usize = 64;
/// Longest silence pattern, rule scope value or silence reason, in characters.
const MAX_PATTERN_CHARS: usize = 256;
/// Longest webhook address, in characters.
const MAX_URL_CHARS: usize = 2048;

impl FieldLimits for SilenceForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("rule_id", MAX_NUMBER_CHARS),
        ("pattern", MAX_PATTERN_CHARS),
        ("hours", MAX_NUMBER_CHARS),
        ("reason", MAX_PATTERN_CHARS),
    ];
}

pub async fn create_silence(
    State(state): State<AppState>,
    AdminForm {
        user,
        session,
        form,
    }: AdminForm<SilenceForm>,
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
                rule_id.map(crate::domain::RuleId),
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
    finish(&state, &user, &session, made, "silences").await
}

pub async fn expire_silence(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm { user, session, .. }: AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "silence")?;
    if !state
        .db
        .expire_silence(crate::domain::SilenceId(id), state.clock.now_ms())
        .await?
    {
        return Err(AppError::NotFound("There is no such silence still running.".into()).into());
    }
    tracing::info!(admin = ?user.name, silence = id, "silence expired");
    BACK.done(&session, "Silence ended.".to_string(), "silences")
        .await
}

#[derive(Deserialize)]
pub struct RuleForm {
    csrf: Option<String>,
    name: String,
    kind: String,
    scope: String,
    #[serde(default)]
    scope_value: String,
    threshold: String,
    minutes: String,
    severity: String,
    /// A checkbox: present when ticked.
    enabled: Option<String>,
}

impl FieldLimits for RuleForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("name", MAX_NAME_CHARS),
        ("kind", MAX_CHOICE_CHARS),
        ("scope", MAX_CHOICE_CHARS),
        ("scope_value", MAX_PATTERN_CHARS),
        ("threshold", MAX_NUMBER_CHARS),
        ("minutes", MAX_NUMBER_CHARS),
        ("severity", MAX_CHOICE_CHARS),
        ("enabled", MAX_CHOICE_CHARS),
    ];
}

impl RuleForm {
    fn rule(&self) -> AppResult<NewRule> {
        let name = label("name", &self.name, MAX_NAME_CHARS)?;
        let kind = RuleKind::parse(&self.kind).ok_or_else(|| {
            let names: Vec<&str> = RuleKind::ALL.iter().map(|k| k.as_str()).collect();
            AppError::invalid("kind", format!("must be one of {}", names.join(", ")))
        })?;
        let scope_value = self.scope_value.trim().to_string();
        if scope_value.chars().count() > MAX_PATTERN_CHARS
            || scope_value.chars().any(char::is_control)
        {
            return Err(AppError::invalid(
                "scope_value",
                "must be at most 256 characters, without control characters",
            ));
        }
        let scope = Scope::parse(kind, &self.scope, &scope_value).ok_or_else(|| {
            AppError::invalid(
                "scope",
                "must be all, or host, hypervisor or name with a value (a rule about hosts takes all or host)",
            )
        })?;
        let bounds = kind.threshold();
        let threshold = number("threshold", &self.threshold, bounds.min, bounds.max)?;
        let minutes = number("minutes", &self.minutes, 0.0, 7.0 * 1440.0)?;
        let severity = match self.severity.as_str() {
            s @ ("info" | "warning" | "critical") => s.to_string(),
            _ => {
                return Err(AppError::invalid(
                    "severity",
                    "must be info, warning or critical",
                ));
            }
        };
        Ok(NewRule {
            name,
            kind,
            scope: self.scope.clone(),
            scope_value: if scope == Scope::All {
                String::new()
            } else {
                scope_value
            },
            threshold,
            duration_s: (minutes * 60.0).round() as i64,
            severity,
            enabled: self.enabled.is_some(),
        })
    }
}

pub async fn create_rule(
    State(state): State<AppState>,
    AdminForm {
        user,
        session,
        form,
    }: AdminForm<RuleForm>,
) -> Result<Response, PageError> {
    let made = async {
        let rule = form.rule()?;
        state
            .db
            .save_alert_rule(None, &rule, &user.name, state.clock.now_ms())
            .await?;
        tracing::info!(admin = ?user.name, rule = ?rule.name, "alert rule added");
        Ok(format!("Rule {} added.", rule.name))
    }
    .await;
    finish(&state, &user, &session, made, "rules").await
}

#[derive(Template, WebTemplate)]
#[template(path = "rule.html")]
pub struct RulePage {
    frame: Frame,
    rule: RuleRow,
    minutes: String,
    error: String,
}

async fn rule_by_id(state: &AppState, id: i64) -> AppResult<RuleRow> {
    state
        .db
        .alert_rules()
        .await?
        .into_iter()
        .find(|r| r.id.0 == id)
        .ok_or_else(|| AppError::NotFound("There is no such rule.".into()))
}

pub async fn rule_page(
    State(state): State<AppState>,
    Admin(user, session): Admin,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, PageError> {
    let rule = rule_by_id(&state, id_of(id, "rule")?).await?;
    Ok(RulePage {
        frame: Frame::new(&state, &user, &session).await?,
        minutes: format!("{}", rule.duration_s as f64 / 60.0),
        rule,
        error: String::new(),
    }
    .into_response())
}

pub async fn save_rule(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm {
        user,
        session,
        form,
    }: AdminForm<RuleForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "rule")?;
    let rule = rule_by_id(&state, id).await?;
    match form.rule() {
        Ok(new) => {
            state
                .db
                .save_alert_rule(
                    Some(crate::domain::RuleId(id)),
                    &new,
                    &user.name,
                    state.clock.now_ms(),
                )
                .await?;
            tracing::info!(admin = ?user.name, rule = ?new.name, "alert rule changed");
            BACK.done(&session, format!("Rule {} saved.", new.name), "rules")
                .await
        }
        Err(e @ AppError::Invalid { .. }) => {
            let page = RulePage {
                frame: Frame::new(&state, &user, &session).await?,
                minutes: form.minutes.clone(),
                rule,
                error: e.to_string(),
            };
            Ok((e.status(), page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn delete_rule(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm { user, session, .. }: AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let rule = rule_by_id(&state, id_of(id, "rule")?).await?;
    state.db.delete_alert_rule(rule.id).await?;
    tracing::info!(admin = ?user.name, rule = ?rule.name, "alert rule deleted");
    BACK.done(
        &session,
        format!("Rule {} deleted, with its alerts.", rule.name),
        "rules",
    )
    .await
}

#[derive(Deserialize)]
pub struct ReceiverForm {
    csrf: Option<String>,
    name: String,
    url: String,
    format: String,
    #[serde(default)]
    group_by: String,
    #[serde(default)]
    group_wait_s: String,
    #[serde(default)]
    group_interval_s: String,
    /// Empty: keep the stored one (none for a new receiver).
    #[serde(default)]
    auth_header: String,
    #[serde(default)]
    ca_pem: String,
    /// "on": remove the stored auth header / CA.
    #[serde(default)]
    clear_auth: String,
    #[serde(default)]
    clear_ca: String,
}

/// Longest Authorization header value, in characters.
const MAX_AUTH_CHARS: usize = 4096;
/// Longest CA certificate (PEM), in characters.
const MAX_CA_CHARS: usize = 24 * 1024;

impl FieldLimits for ReceiverForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[
        ("csrf", MAX_CSRF_CHARS),
        ("name", MAX_NAME_CHARS),
        ("url", MAX_URL_CHARS),
        ("format", MAX_CHOICE_CHARS),
        ("group_by", MAX_PATTERN_CHARS),
        ("group_wait_s", MAX_NUMBER_CHARS),
        ("group_interval_s", MAX_NUMBER_CHARS),
        ("auth_header", MAX_AUTH_CHARS),
        ("ca_pem", MAX_CA_CHARS),
        ("clear_auth", MAX_CHOICE_CHARS),
        ("clear_ca", MAX_CHOICE_CHARS),
    ];
}

impl ReceiverForm {
    /// The receiver the form describes. The auth header and CA are `None` when left empty
    /// (kept as stored), `Some("")` when to be cleared.
    fn receiver(&self, reach: &Reach) -> AppResult<NewReceiver> {
        let name = label("name", &self.name, MAX_NAME_CHARS)?;
        let url = webhook_url(&self.url)?;
        reach
            .check_url(&url)
            .map_err(|e| AppError::invalid("url", e))?;
        let format = match self.format.as_str() {
            f @ ("alertmanager" | "json") => f,
            _ => return Err(AppError::invalid("format", "must be alertmanager or json")),
        };
        let group_by = labels::parse_group_by(&self.group_by);
        if let Some(bad) = group_by.iter().find(|n| !labels::valid_label_name(n)) {
            return Err(AppError::invalid(
                "group_by",
                format!("{bad:?} is not a label name (letters, digits and _)"),
            ));
        }
        let seconds = |field: &str, text: &str, default: i64| -> AppResult<i64> {
            if text.trim().is_empty() {
                return Ok(default);
            }
            Ok(number(field, text, 0.0, 86_400.0)?.round() as i64)
        };
        let auth = self.auth_header.trim();
        // What HTTP can carry as a header value (visible ASCII and spaces): anything else would
        // be saved, then fail every delivery.
        if auth.chars().any(char::is_control)
            || axum::http::HeaderValue::from_str(auth).is_err()
            || !auth.is_ascii()
        {
            return Err(AppError::invalid(
                "auth_header",
                "must be one line of visible ASCII characters (e.g. Bearer followed by a token)",
            ));
        }
        let ca = self.ca_pem.trim();
        if !ca.is_empty() {
            crate::alerts::client::agent(
                Some(ca.as_bytes()),
                crate::alerts::client::POST_TIMEOUT,
                reach,
            )
            .map_err(|e| AppError::invalid("ca_pem", e))?;
        }
        let secret = |value: &str, clear: &str| -> Option<String> {
            if clear == "on" {
                Some(String::new())
            } else {
                (!value.is_empty()).then(|| value.to_string())
            }
        };
        Ok(NewReceiver {
            name,
            url,
            format: format.into(),
            group_by: group_by.join(","),
            group_wait_s: seconds("group_wait_s", &self.group_wait_s, 30)?,
            group_interval_s: seconds("group_interval_s", &self.group_interval_s, 300)?,
            auth_header: secret(auth, &self.clear_auth),
            ca_pem: secret(ca, &self.clear_ca),
        })
    }
}

/// The addresses the server's notifications may be sent to.
fn reach(state: &AppState) -> Reach {
    Reach {
        allowed: state.options.receiver_networks.clone(),
    }
}

/// A webhook address: http or https, to a host, at most 2,048 characters.
fn webhook_url(text: &str) -> AppResult<String> {
    let text = text.trim();
    let uri: Option<axum::http::Uri> = text.parse().ok();
    let fits = text.len() <= MAX_URL_CHARS
        && uri.is_some_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https"))
                && u.host().is_some_and(|h| !h.is_empty())
        });
    if !fits {
        return Err(AppError::invalid(
            "url",
            "must be an http:// or https:// address of at most 2048 characters",
        ));
    }
    Ok(text.to_string())
}

pub async fn create_receiver(
    State(state): State<AppState>,
    AdminForm {
        user,
        session,
        form,
    }: AdminForm<ReceiverForm>,
) -> Result<Response, PageError> {
    let made = async {
        let mut receiver = form.receiver(&reach(&state))?;
        receiver.auth_header = receiver.auth_header.filter(|a| !a.is_empty());
        receiver.ca_pem = receiver.ca_pem.filter(|c| !c.is_empty());
        state
            .db
            .insert_receiver(&receiver, state.clock.now_ms())
            .await?;
        tracing::info!(admin = ?user.name, receiver = ?receiver.name, "receiver added");
        Ok(format!(
            "Receiver {} added: it gets every alert that fires or resolves from now on.",
            receiver.name
        ))
    }
    .await;
    finish(&state, &user, &session, made, "receivers").await
}

pub async fn save_receiver(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm {
        user,
        session,
        form,
    }: AdminForm<ReceiverForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "receiver")?;
    let saved = async {
        let receiver = form.receiver(&reach(&state))?;
        state
            .db
            .update_receiver(crate::domain::ReceiverId(id), &receiver)
            .await?;
        tracing::info!(admin = ?user.name, receiver = ?receiver.name, "receiver changed");
        Ok(format!("Receiver {} saved.", receiver.name))
    }
    .await;
    finish(&state, &user, &session, saved, "receivers").await
}

pub async fn delete_receiver(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm { user, session, .. }: AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "receiver")?;
    state
        .db
        .delete_receiver(crate::domain::ReceiverId(id))
        .await?;
    tracing::info!(admin = ?user.name, receiver = id, "receiver deleted");
    BACK.done(&session, "Receiver deleted.".to_string(), "receivers")
        .await
}

csrf_field!(SilenceForm, RuleForm, ReceiverForm);

#[cfg(test)]
mod tests {
    use super::*;

    /// The `<select>` with `id`, up to its end.
    fn select<'a>(html: &'a str, id: &str) -> &'a str {
        let start = html
            .find(&format!("<select id=\"{id}\""))
            .unwrap_or_else(|| panic!("no select {id} in {html}"));
        let len = html[start..].find("</select>").unwrap();
        &html[start..start + len]
    }

    /// Each kind offered once, under its stored name and its label, and nothing else.
    fn assert_offers_every_kind(kinds: &str) {
        assert_eq!(
            kinds.matches("<option").count(),
            RuleKind::ALL.len(),
            "{kinds}"
        );
        for kind in RuleKind::ALL {
            let option = format!("<option value=\"{}\"", kind.as_str());
            assert_eq!(kinds.matches(&option).count(), 1, "{kind:?}: {kinds}");
            let text = format!("{} ({})</option>", kind.label(), kind.spec().measured_in);
            assert!(kinds.contains(&text), "{kind:?}: {kinds}");
        }
    }

    fn admin_frame() -> Frame {
        Frame {
            role: "admin",
            csrf: "token".into(),
            ..Frame::default()
        }
    }

    #[test]
    fn the_new_rule_form_offers_every_kind_and_the_first_ones_threshold() {
        let page = AlertsPage {
            frame: admin_frame(),
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
        };
        let html = page.render().unwrap();
        assert_offers_every_kind(select(&html, "rule-kind"));
        let first = RuleKind::ALL[0];
        assert!(
            html.contains(&format!(
                "name=\"threshold\" inputmode=\"decimal\" value=\"{}\"",
                first.threshold().default
            )),
            "{html}"
        );
    }

    #[test]
    fn a_rules_page_offers_every_kind_with_its_own_selected() {
        for kind in RuleKind::ALL {
            let page = RulePage {
                frame: admin_frame(),
                rule: RuleRow {
                    id: crate::domain::RuleId(4),
                    name: "r".into(),
                    kind,
                    scope: "all".into(),
                    scope_value: String::new(),
                    threshold: kind.threshold().default,
                    duration_s: 60,
                    severity: "info".into(),
                    enabled: true,
                    updated_ms: 0,
                    updated_by: "t".into(),
                },
                minutes: "1".into(),
                error: String::new(),
            };
            let html = page.render().unwrap();
            let kinds = select(&html, "rule-kind");
            assert_offers_every_kind(kinds);
            assert_eq!(kinds.matches(" selected").count(), 1, "{kinds}");
            assert!(
                kinds.contains(&format!("<option value=\"{}\" selected>", kind.as_str())),
                "{kinds}"
            );
        }
    }

    /// A threshold is refused outside its kind's bounds, and taken at them.
    #[test]
    fn a_rules_threshold_is_checked_against_its_kinds_bounds() {
        let form = |kind: RuleKind, threshold: f64| RuleForm {
            csrf: None,
            name: "r".into(),
            kind: kind.as_str().into(),
            scope: "all".into(),
            scope_value: String::new(),
            threshold: threshold.to_string(),
            minutes: "1".into(),
            severity: "info".into(),
            enabled: None,
        };
        for kind in RuleKind::ALL {
            let b = kind.threshold();
            for (threshold, ok) in [
                (b.min, true),
                (b.default, true),
                (b.max, true),
                (b.min - 1.0, false),
                (b.max + 1.0, false),
            ] {
                match (form(kind, threshold).rule(), ok) {
                    (Ok(rule), true) => assert_eq!((rule.kind, rule.threshold), (kind, threshold)),
                    (Err(AppError::Invalid { field, .. }), false) => {
                        assert_eq!(field, "threshold", "{kind:?} {threshold}")
                    }
                    (got, _) => panic!("{kind:?} {threshold}: {got:?}"),
                }
            }
        }
        let unknown = RuleForm {
            kind: "cpu_hot".into(),
            ..form(RuleKind::ALL[0], 1.0)
        };
        let refused = match unknown.rule() {
            Err(e @ AppError::Invalid { .. }) => e.to_string(),
            got => panic!("{got:?}"),
        };
        for kind in RuleKind::ALL {
            assert!(refused.contains(kind.as_str()), "{refused}");
        }
    }

    #[test]
    fn webhook_addresses_are_http_or_https_to_a_host() {
        let cases = [
            ("https://hooks.example.com/x?y=1", true),
            ("http://127.0.0.1:9093/api/v2/alerts", true),
            ("ftp://example.com/", false),
            ("javascript:alert(1)", false),
            ("/relative", false),
            ("", false),
        ];
        for (url, ok) in cases {
            assert_eq!(webhook_url(url).is_ok(), ok, "{url}");
        }
    }
}
