//! What kind of request this is, by what it carries: how its credential is found (the
//! credential found then decides its budget and its slots).

use axum::http::request::Parts;
use axum::http::{Method, header};

use crate::auth::session::SESSION_COOKIE;

/// What a request carries, and so how its credential is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `/healthz`: no body, no work, always answered.
    Health,
    /// `/readyz`: slots of its own.
    Probe,
    /// A login hashes a password whatever cookie it carries: a request without a credential.
    Login,
    Token,
    Session,
    Anonymous,
}

pub(super) fn kind(parts: &Parts) -> Kind {
    match parts.uri.path() {
        "/healthz" => return Kind::Health,
        "/readyz" => return Kind::Probe,
        _ => {}
    }
    if parts.method == Method::POST && parts.uri.path() == "/login" {
        Kind::Login
    } else if parts.headers.contains_key(header::AUTHORIZATION) {
        Kind::Token
    } else if session_cookie(parts).is_some() {
        Kind::Session
    } else {
        Kind::Anonymous
    }
}

/// The value of the session cookie the browser sent, if any; whether it names a session is
/// checked against the store (a forged one spends as a request without a credential).
pub(super) fn session_cookie(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = axum::http::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// Method, path, headers, and the kind of request.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Kind);

    #[test]
    fn each_request_is_known_by_what_it_carries() {
        let session = format!("theme=dark; {SESSION_COOKIE}=abc");
        let cases: [Case; 9] = [
            ("GET", "/healthz", &[], Kind::Health),
            (
                "GET",
                "/readyz",
                &[("authorization", "Bearer x")],
                Kind::Probe,
            ),
            ("GET", "/login", &[], Kind::Anonymous),
            ("POST", "/login", &[("cookie", &session)], Kind::Login),
            ("GET", "/", &[("cookie", &session)], Kind::Session),
            (
                "GET",
                "/",
                &[("cookie", "not_tickscope_session=abc")],
                Kind::Anonymous,
            ),
            (
                "POST",
                "/api/v1/reports",
                &[("authorization", "Bearer x")],
                Kind::Token,
            ),
            ("POST", "/api/v1/reports", &[], Kind::Anonymous),
            (
                "GET",
                "/",
                &[("cookie", &session), ("authorization", "Bearer x")],
                Kind::Token,
            ),
        ];
        for (method, path, headers, expected) in cases {
            assert_eq!(
                kind(&parts(method, path, headers)),
                expected,
                "{method} {path} {headers:?}"
            );
        }
    }
}
