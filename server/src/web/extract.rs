//! Who may see a page or send a form, checked before a handler runs: [`Admin`] for the pages
//! only admins see, [`AdminForm`] for their forms, whose CSRF token is checked too.

use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tower_sessions::Session;

use super::error::PageError;
use super::form::{BoundedForm, CsrfField, FieldLimits};
use crate::auth::{self, PageUser, User};
use crate::db::Db;

/// A logged-in admin. A visitor who is not logged in is sent to the login page (as by
/// [`PageUser`]); a viewer is refused 403.
pub struct Admin(pub User, pub Session);

impl<S> FromRequestParts<S> for Admin
where
    Db: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Admin, Response> {
        let PageUser(user, session) = PageUser::from_request_parts(parts, state).await?;
        user.require_admin()
            .map_err(|e| PageError::from(e).into_response())?;
        Ok(Admin(user, session))
    }
}

/// A form an admin sent from this session. In this order: a visitor not logged in is sent to
/// the login page; the form is read as a [`BoundedForm`]; a CSRF token that is missing or not
/// this session's is refused 403; a viewer is refused 403. Its parts: the admin, their
/// session and the form.
pub struct AdminForm<T>(pub User, pub Session, pub T);

impl<S, T> FromRequest<S> for AdminForm<T>
where
    Db: FromRef<S>,
    S: Send + Sync,
    T: DeserializeOwned + FieldLimits + CsrfField + Send,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let PageUser(user, session) = PageUser::from_request_parts(&mut parts, state).await?;
        let BoundedForm(form) =
            BoundedForm::<T>::from_request(Request::from_parts(parts, body), state).await?;
        let csrf = form.csrf().map(str::to_string);
        let checked = async {
            auth::check_csrf(&session, csrf.as_deref()).await?;
            user.require_admin()
        };
        checked
            .await
            .map_err(|e| PageError::from(e).into_response())?;
        Ok(AdminForm(user, session, form))
    }
}
