//! Dashboard sessions: who is logged in, and the CSRF token of their forms.
//!
//! The session lives in tower-sessions (an HttpOnly, SameSite=Strict cookie naming a row of the
//! `tower_sessions` table). It holds the user's id and a fingerprint of their password hash:
//! name and role are read from the users table on every request, so a changed role or a removed
//! user takes effect at once, and a changed password ends every session opened with the old one.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use subtle::ConstantTimeEq;
use tower_sessions::Session;

use crate::crypto::{random_hex, sha256_hex};
use crate::db::Db;
use crate::error::{AppError, AppResult};

const USER_ID_KEY: &str = "user_id";
const CREDENTIAL_KEY: &str = "credential";
const CSRF_KEY: &str = "csrf";
/// The name of the hidden form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

pub use crate::domain::UserRole;

/// A logged-in user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: UserRole,
}

impl User {
    pub fn require_admin(&self) -> AppResult<()> {
        match self.role {
            UserRole::Admin => Ok(()),
            UserRole::Viewer => Err(AppError::Forbidden(
                "a viewer cannot change anything; ask an admin".into(),
            )),
        }
    }
}

/// The user logged in to this session, if any (and if they still exist).
pub async fn current_user(session: &Session, db: &Db) -> AppResult<Option<User>> {
    let Some(id) = session.get::<i64>(USER_ID_KEY).await? else {
        return Ok(None);
    };
    let Some(row) = db.user_by_id(crate::domain::UserId(id)).await? else {
        return Ok(None);
    };
    let opened_with = session.get::<String>(CREDENTIAL_KEY).await?;
    if opened_with.as_deref() != Some(credential(&row.password_hash).as_str()) {
        return Ok(None);
    }
    Ok(Some(User {
        id,
        name: row.name,
        role: row.role,
    }))
}

/// What a session remembers of the password it was opened with: a digest of its hash, which
/// changes with every new password (the hash is salted), and tells nothing about it.
fn credential(password_hash: &str) -> String {
    sha256_hex(password_hash.as_bytes())[..32].to_string()
}

/// Logs a user in with the password hash they proved: a new session id (so one planted before
/// login is worthless) with a new CSRF token.
pub async fn log_in(session: &Session, user_id: i64, password_hash: &str) -> AppResult<()> {
    session.cycle_id().await?;
    session.insert(USER_ID_KEY, user_id).await?;
    session
        .insert(CREDENTIAL_KEY, credential(password_hash))
        .await?;
    session
        .insert(CSRF_KEY, random_hex()?)
        .await
        .map_err(AppError::from)
}

pub async fn log_out(session: &Session) -> AppResult<()> {
    session.flush().await.map_err(AppError::from)
}

/// The session's CSRF token, made on first use; every form carries it back.
pub async fn csrf_token(session: &Session) -> AppResult<String> {
    if let Some(token) = session.get::<String>(CSRF_KEY).await? {
        return Ok(token);
    }
    let token = random_hex()?;
    session.insert(CSRF_KEY, &token).await?;
    Ok(token)
}

/// Refuses a form whose CSRF token is missing or not this session's.
pub async fn check_csrf(session: &Session, submitted: Option<&str>) -> AppResult<()> {
    let expected = session.get::<String>(CSRF_KEY).await?;
    match (expected, submitted) {
        (Some(expected), Some(submitted))
            if bool::from(expected.as_bytes().ct_eq(submitted.as_bytes())) =>
        {
            Ok(())
        }
        _ => Err(AppError::Forbidden(
            "the form's security token is missing or stale: reload the page and try again".into(),
        )),
    }
}

/// The cookie that carries the login form's CSRF token. The login form gets its own cookie, not a
/// session: a visitor who arrives from another site's link comes without the SameSite=Strict
/// session cookie, and a new session set on the login page would replace the one they have.
pub const LOGIN_CSRF_COOKIE: &str = "tickscope_login";

/// A new CSRF token for the login form and the `Set-Cookie` value that carries it.
pub fn login_csrf(secure: bool) -> AppResult<(String, String)> {
    let token = random_hex()?;
    let cookie = format!(
        "{LOGIN_CSRF_COOKIE}={token}; Path=/login; HttpOnly; SameSite=Strict; Max-Age=3600{}",
        if secure { "; Secure" } else { "" }
    );
    Ok((token, cookie))
}

/// Refuses a login form whose token is not the one its cookie carries.
pub fn check_login_csrf(headers: &axum::http::HeaderMap, submitted: Option<&str>) -> AppResult<()> {
    let expected = headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == LOGIN_CSRF_COOKIE)
        .map(|(_, value)| value);
    match (expected, submitted) {
        (Some(expected), Some(submitted))
            if !expected.is_empty()
                && bool::from(expected.as_bytes().ct_eq(submitted.as_bytes())) =>
        {
            Ok(())
        }
        _ => Err(AppError::Forbidden(
            "the form's security token is missing or stale: reload the page and try again".into(),
        )),
    }
}

/// A page's viewer: the logged-in user, or a redirect to the login page that comes back here.
pub struct PageUser(pub User, pub Session);

impl<S> FromRequestParts<S> for PageUser
where
    Db: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let session = Session::from_request_parts(parts, state)
            .await
            .map_err(|(status, message)| (status, message).into_response())?;
        match current_user(&session, &Db::from_ref(state)).await {
            Ok(Some(user)) => Ok(PageUser(user, session)),
            Ok(None) => {
                // Back to a page after login; a form's POST cannot be replayed as a GET.
                if parts.method != axum::http::Method::GET {
                    return Err(Redirect::to("/login").into_response());
                }
                let here = parts
                    .uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_string();
                Err(
                    Redirect::to(&format!("/login?next={}", crate::percent::path(&here)))
                        .into_response(),
                )
            }
            Err(e) => Err(e.into_response()),
        }
    }
}

/// Where to go after logging in: a local path only, never another site. Browsers drop tabs and
/// newlines from addresses and read `\\` as `/`, so `/\t/evil` and `/\\evil` would leave the
/// site like `//evil`: only printable ASCII without backslashes is followed.
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && path.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') =>
        {
            path
        }
        _ => "/",
    }
}

/// The dashboard's session cookie.
pub const SESSION_COOKIE: &str = "tickscope_session";

/// A dashboard session lapses after this long without a request (a wall screen that refreshes
/// stays logged in).
pub const SESSION_IDLE_HOURS: i64 = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_login() {
        let cases = [
            (Some("/guests/3"), "/guests/3"),
            (
                Some("/guests?host=a&sort=waste"),
                "/guests?host=a&sort=waste",
            ),
            (Some("//evil.example/"), "/"),
            (Some("https://evil.example/"), "/"),
            (Some("/\\evil.example"), "/"),
            (Some("/\t/evil.example"), "/"),
            (Some("/\n/evil.example"), "/"),
            (Some("/ /evil.example"), "/"),
            (None, "/"),
        ];
        for (next, expected) in cases {
            assert_eq!(safe_next(next), expected, "{next:?}");
        }
        assert_eq!(
            crate::percent::path("/guests?host=a b"),
            "/guests%3Fhost%3Da%20b"
        );
    }
}
