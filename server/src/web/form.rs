//! What every dashboard form checks: that it is small, that each of its fields is within its
//! length, and that the names and numbers typed into it
//! are acceptable.

use axum::Form;
use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::error::PageError;
use crate::error::{AppError, AppResult};

/// Longest form body, in bytes. The longest field of any form is a webhook address (2,048
/// characters, up to 4 bytes each once percent-decoded, 3 percent-encoded bytes per byte); the
/// rest are far shorter. axum's default, 2 MiB, let 1.5 MB login names through.
pub const MAX_FORM_BYTES: usize = 32 * 1024;

/// Longest password, in characters: room for any passphrase or password manager's output.
/// argon2 reads it whole, so it is bounded like every other field.
pub const MAX_PASSWORD_CHARS: usize = 1024;
/// The CSRF token: 32 random bytes in hex.
pub const MAX_CSRF_CHARS: usize = 64;
/// A choice among a few words (a role, a format, a severity, a checkbox's `on`).
pub const MAX_CHOICE_CHARS: usize = 32;
/// A number typed as text.
pub const MAX_NUMBER_CHARS: usize = 32;

/// The fields a form may carry, each with its longest value in characters. A field not listed
/// is refused: the table is the whole form.
pub trait FieldLimits {
    const MAX_CHARS: &'static [(&'static str, usize)];
}

/// Checks a URL-encoded form body against `limits`, before anything else reads it: a field too
/// long, or one the form does not have, is refused, and nothing of it is kept or logged.
pub fn check_lengths(body: &[u8], limits: &[(&str, usize)]) -> AppResult<()> {
    for (field, value) in form_urlencoded::parse(body) {
        let Some(&(known, max)) = limits.iter().find(|(name, _)| *name == field) else {
            // The unknown name itself is not repeated: it could be anything.
            return Err(AppError::invalid(
                "form",
                "has a field this form does not have",
            ));
        };
        if value.chars().count() > max {
            return Err(AppError::invalid(
                known,
                format!("must be at most {max} characters"),
            ));
        }
    }
    Ok(())
}

/// `Form<T>` read at most [`MAX_FORM_BYTES`], with every field checked against
/// `T::MAX_CHARS` before `T` is built.
pub struct BoundedForm<T>(pub T);

impl<S, T> FromRequest<S> for BoundedForm<T>
where
    S: Send + Sync,
    T: DeserializeOwned + FieldLimits,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
            .await
            .map_err(|_| {
                PageError::from(AppError::TooLarge(format!(
                    "a form may carry at most {} KiB",
                    MAX_FORM_BYTES / 1024
                )))
                .into_response()
            })?;
        check_lengths(&bytes, T::MAX_CHARS).map_err(|e| PageError::from(e).into_response())?;
        let request = Request::from_parts(parts, Body::from(bytes));
        // axum's own reading of the form: its content type check and its refusals.
        let Form(form) = Form::<T>::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(BoundedForm(form))
    }
}

/// A form that carries nothing but its CSRF token (logout, revoking a token).
#[derive(Deserialize)]
pub struct CsrfForm {
    pub csrf: Option<String>,
}

impl FieldLimits for CsrfForm {
    const MAX_CHARS: &'static [(&'static str, usize)] = &[("csrf", MAX_CSRF_CHARS)];
}

/// A form that carries the session's CSRF token in its `csrf` field.
pub trait CsrfField {
    fn csrf(&self) -> Option<&str>;
}

/// Implements [`CsrfField`] for forms whose `csrf` field is an `Option<String>`, in any module of
/// `web/` however deep.
macro_rules! csrf_field {
    ($($form:ty),* $(,)?) => {
        $(impl $crate::web::form::CsrfField for $form {
            fn csrf(&self) -> Option<&str> {
                self.csrf.as_deref()
            }
        })*
    };
}
pub(super) use csrf_field;

csrf_field!(CsrfForm);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_refused_beyond_their_length_or_when_unknown() {
        let limits = [("name", 4), ("csrf", 2)];
        let cases: [(&str, Result<(), &str>); 11] = [
            ("name=abcd&csrf=ab", Ok(())),
            ("", Ok(())),
            ("name=", Ok(())),
            ("name=abcde", Err("name: must be at most 4 characters")),
            // Characters, not bytes, once decoded.
            ("name=%C3%A9%C3%A9%C3%A9%C3%A9", Ok(())),
            (
                "name=%E2%80%AE%E2%80%AEabc",
                Err("name: must be at most 4 characters"),
            ),
            ("name=a+b+c", Err("name: must be at most 4 characters")),
            ("name=a+bc", Ok(())),
            ("csrf=abc", Err("csrf: must be at most 2 characters")),
            // A field twice is checked twice.
            (
                "name=a&name=abcdef",
                Err("name: must be at most 4 characters"),
            ),
            (
                "password=x",
                Err("form: has a field this form does not have"),
            ),
        ];
        for (body, expected) in cases {
            let got = check_lengths(body.as_bytes(), &limits).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_string), "{body}");
        }
    }
}
