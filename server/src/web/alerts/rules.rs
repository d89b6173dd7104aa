//! The rules of `/alerts`: added there, each edited on its own page (`/alerts/rules/{id}`), and
//! deleted with its alerts. What each kind offers and accepts is the kind's own
//! (`RuleKind::spec`).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::page::{AlertsPage, BACK, MAX_NAME_CHARS, MAX_PATTERN_CHARS, id_of};
use crate::alerts::{RuleKind, Scope};
use crate::db::{RuleRow, RuleSettings};
use crate::domain::RuleId;
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::web::error::PageError;
use crate::web::extract::{Admin, AdminForm};
use crate::web::flash::finish;
use crate::web::form::{
    CsrfForm, FieldLimits, MAX_CHOICE_CHARS, MAX_CSRF_CHARS, MAX_NUMBER_CHARS, csrf_field, label,
    number,
};
use crate::web::frame::Frame;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts/rules", post(create_rule))
        .route("/alerts/rules/{id}", get(rule_page).post(save_rule))
        .route("/alerts/rules/{id}/delete", post(delete_rule))
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
    fn rule(&self) -> AppResult<RuleSettings> {
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
        Ok(RuleSettings {
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

async fn create_rule(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<RuleForm>,
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
    finish::<AlertsPage>(&state, &user, &session, made, "rules").await
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

async fn rule_page(
    State(state): State<AppState>,
    Admin(user, session): Admin,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, PageError> {
    let rule = rule_by_id(&state, id_of(id, "rule")?).await?;
    Ok(RulePage {
        frame: Frame::new(&state, &user, &session).await?,
        minutes: format!("{}", rule.settings.duration_s as f64 / 60.0),
        rule,
        error: String::new(),
    }
    .into_response())
}

async fn save_rule(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, form): AdminForm<RuleForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "rule")?;
    let rule = rule_by_id(&state, id).await?;
    match form.rule() {
        Ok(new) => {
            state
                .db
                .save_alert_rule(Some(RuleId(id)), &new, &user.name, state.clock.now_ms())
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

async fn delete_rule(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let rule = rule_by_id(&state, id_of(id, "rule")?).await?;
    state.db.delete_alert_rule(rule.id).await?;
    tracing::info!(admin = ?user.name, rule = ?rule.settings.name, "alert rule deleted");
    BACK.done(
        &session,
        format!("Rule {} deleted, with its alerts.", rule.settings.name),
        "rules",
    )
    .await
}

csrf_field!(RuleForm);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::alerts::page::AlertsPage;

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

    /// The new rule form is on `/alerts` itself.
    #[test]
    fn the_new_rule_form_offers_every_kind_and_the_first_ones_threshold() {
        let page = AlertsPage::empty(admin_frame());
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
                    id: RuleId(4),
                    settings: RuleSettings {
                        name: "r".into(),
                        kind,
                        scope: "all".into(),
                        scope_value: String::new(),
                        threshold: kind.threshold().default,
                        duration_s: 60,
                        severity: "info".into(),
                        enabled: true,
                    },
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
}
