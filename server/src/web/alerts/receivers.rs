//! The webhook receivers of `/alerts`: added, edited (their auth header and CA kept unless
//! replaced or removed, and never shown back), deleted.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;

use super::page::{AlertsPage, BACK, MAX_NAME_CHARS, MAX_PATTERN_CHARS, id_of};
use crate::alerts::client::{self, Reach};
use crate::alerts::labels;
use crate::db::ReceiverSettings;
use crate::domain::ReceiverId;
use crate::error::{AppError, AppResult};
use crate::state::AppState;
use crate::web::error::PageError;
use crate::web::extract::AdminForm;
use crate::web::flash::finish;
use crate::web::form::{
    CsrfForm, FieldLimits, MAX_CHOICE_CHARS, MAX_CSRF_CHARS, MAX_NUMBER_CHARS, csrf_field, label,
    number,
};

/// Longest webhook address, in characters.
const MAX_URL_CHARS: usize = 2048;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts/receivers", post(create_receiver))
        .route("/alerts/receivers/{id}", post(save_receiver))
        .route("/alerts/receivers/{id}/delete", post(delete_receiver))
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
    fn receiver(&self, reach: &Reach) -> AppResult<ReceiverSettings> {
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
            client::agent(Some(ca.as_bytes()), client::POST_TIMEOUT, reach)
                .map_err(|e| AppError::invalid("ca_pem", e))?;
        }
        let secret = |value: &str, clear: &str| -> Option<String> {
            if clear == "on" {
                Some(String::new())
            } else {
                (!value.is_empty()).then(|| value.to_string())
            }
        };
        Ok(ReceiverSettings {
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

async fn create_receiver(
    State(state): State<AppState>,
    AdminForm(user, session, form): AdminForm<ReceiverForm>,
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
    finish::<AlertsPage>(&state, &user, &session, made, "receivers").await
}

async fn save_receiver(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, form): AdminForm<ReceiverForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "receiver")?;
    let saved = async {
        let receiver = form.receiver(&reach(&state))?;
        state.db.update_receiver(ReceiverId(id), &receiver).await?;
        tracing::info!(admin = ?user.name, receiver = ?receiver.name, "receiver changed");
        Ok(format!("Receiver {} saved.", receiver.name))
    }
    .await;
    finish::<AlertsPage>(&state, &user, &session, saved, "receivers").await
}

async fn delete_receiver(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    AdminForm(user, session, _): AdminForm<CsrfForm>,
) -> Result<Response, PageError> {
    let id = id_of(id, "receiver")?;
    state.db.delete_receiver(ReceiverId(id)).await?;
    tracing::info!(admin = ?user.name, receiver = id, "receiver deleted");
    BACK.done(&session, "Receiver deleted.".to_string(), "receivers")
        .await
}

csrf_field!(ReceiverForm);

#[cfg(test)]
mod tests {
    use super::*;

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
