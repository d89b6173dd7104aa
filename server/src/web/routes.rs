//! The dashboard's routes: every page and form, and the stylesheet.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};

use super::flash::page as notice_page;
use super::{account, alerts, guest, guests, hosts, login, overview, plan, settings};
use crate::state::AppState;

const STYLESHEET: &str = include_str!("../../../static/style.css");

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(overview::overview))
        .route("/guests", get(guests::guests))
        .route("/guests/{id}", get(guest::guest))
        .route("/hosts", get(hosts::list))
        .route("/hosts/{id}", get(hosts::one))
        .route("/plan", get(plan::plan))
        .route("/settings", get(settings::page))
        .route("/settings/tokens", post(settings::create_token))
        .route("/settings/tokens/{id}/revoke", post(settings::revoke_token))
        .route("/settings/users", post(settings::create_user))
        .route("/settings/users/{id}/role", post(settings::set_role))
        .route(
            "/settings/users/{id}/password",
            post(settings::set_password),
        )
        .route("/settings/users/{id}/remove", post(settings::remove_user))
        // `/alerts` and its forms, each part's routes beside its handlers in `web/alerts/`.
        .merge(alerts::routes())
        .route("/account", get(notice_page::<account::AccountPage>))
        .route("/account/password", post(account::change_password))
        .route("/settings/cost", post(settings::save_cost))
        .route("/login", get(login::page).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/static/style.css", get(stylesheet))
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLESHEET,
    )
}
