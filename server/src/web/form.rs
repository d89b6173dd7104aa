//! What every dashboard form checks: that an admin sent it from this session, and that the
//! names and numbers typed into it are acceptable.

use tower_sessions::Session;

use crate::auth::{self, User};
use crate::error::{AppError, AppResult};

/// Checks the caller is an admin and the form is this session's.
pub async fn admin_form(user: &User, session: &Session, csrf: Option<&str>) -> AppResult<()> {
    auth::check_csrf(session, csrf).await?;
    user.require_admin()
}

/// A name or label typed into a form: trimmed, 1 to `max` characters, no control characters.
pub fn label(field: &str, value: &str, max: usize) -> AppResult<String> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(AppError::invalid(
            field,
            format!("must be 1 to {max} characters, without control characters"),
        ));
    }
    Ok(value.to_string())
}

/// A number typed into a form, within `min..=max`.
pub fn number(field: &str, text: &str, min: f64, max: f64) -> AppResult<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (min..=max).contains(v))
        .ok_or_else(|| AppError::invalid(field, format!("must be a number from {min} to {max}")))
}
