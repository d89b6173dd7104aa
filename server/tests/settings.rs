//! The settings page: tokens, users and the cost model, for admins only, every form with CSRF.

mod common;

use axum::http::{Method, StatusCode};

use common::{Login, PASSWORD, fleet_report, form, server};
use tickscope_server::app::{AppState, Options};

async fn post(
    s: &common::Server,
    login: &Login,
    path: &str,
    fields: &[(&str, &str)],
) -> common::Reply {
    s.browse(Method::POST, path, Some(&login.cookie), Some(form(fields)))
        .await
}

/// The four forms of the settings page, with valid values, without their CSRF token.
const FORMS: [(&str, &[(&str, &str)]); 4] = [
    ("/settings/tokens", &[("name", "hv-09"), ("role", "agent")]),
    ("/settings/tokens/1/revoke", &[]),
    (
        "/settings/users",
        &[("name", "eve"), ("role", "admin"), ("password", PASSWORD)],
    ),
    (
        "/settings/cost",
        &[
            ("watts_per_busy_core", "9"),
            ("price_per_kwh", "0.4"),
            ("currency", "CHF"),
        ],
    ),
];

async fn state_of(s: &common::Server) -> (usize, usize, String, Option<i64>) {
    let tokens = s.db.tokens().await.unwrap();
    let revoked = tokens.iter().find(|t| t.id == 1).and_then(|t| t.revoked_ms);
    (
        tokens.len(),
        s.db.users().await.unwrap().len(),
        s.db.setting("cost_model")
            .await
            .unwrap()
            .unwrap_or_default(),
        revoked,
    )
}

#[tokio::test]
async fn a_viewer_can_change_nothing() {
    let s = server().await;
    let viewer = s.login("victor", "viewer").await;
    let page = s.page("/settings", &viewer).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(
        !s.page("/", &viewer)
            .await
            .body
            .contains("href=\"/settings\"")
    );
    let before = state_of(&s).await;
    for (path, fields) in FORMS {
        let mut fields = fields.to_vec();
        fields.push(("csrf", &viewer.csrf));
        let reply = post(&s, &viewer, path, &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(
        state_of(&s).await,
        before,
        "a viewer's POST changed something"
    );
}

#[tokio::test]
async fn every_settings_form_needs_this_sessions_csrf_token() {
    let s = server().await;
    let admin = s.login("ada", "admin").await;
    let other = s.login("bob", "admin").await;
    let before = state_of(&s).await;
    for (path, fields) in FORMS {
        for csrf in [None, Some("0000"), Some(other.csrf.as_str())] {
            let mut fields = fields.to_vec();
            if let Some(csrf) = csrf {
                fields.push(("csrf", csrf));
            }
            let reply = post(&s, &admin, path, &fields).await;
            assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path} with {csrf:?}");
        }
    }
    assert_eq!(state_of(&s).await, before);
}

#[tokio::test]
async fn a_new_token_is_shown_once_works_and_can_be_revoked() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let admin = s.login("ada", "admin").await;
    let reply = post(
        &s,
        &admin,
        "/settings/tokens",
        &[
            ("name", "grafana <reader>"),
            ("role", "viewer"),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let at = reply.body.find("tks_").expect("the new token is shown");
    let token: String = reply.body[at..].chars().take(68).collect();
    assert!(!reply.body.contains("grafana <reader>"), "raw token name");
    // It reads the API.
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&token), None)
        .await;
    assert_eq!(api.status, StatusCode::OK);
    // Never shown again.
    let again = s.page("/settings", &admin).await;
    assert!(!again.body.contains(&token));
    assert!(
        again.body.contains("grafana &#60;reader&#62;")
            || again.body.contains("grafana &lt;reader&gt;")
    );

    let id =
        s.db.tokens()
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.name == "grafana <reader>")
            .unwrap()
            .id;
    let revoke = post(
        &s,
        &admin,
        &format!("/settings/tokens/{id}/revoke"),
        &[("csrf", &admin.csrf)],
    )
    .await;
    assert_eq!(revoke.status, StatusCode::SEE_OTHER);
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&token), None)
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    // A token only an agent may bind to a host.
    let bad = post(
        &s,
        &admin,
        "/settings/tokens",
        &[
            ("name", "x"),
            ("role", "viewer"),
            ("host", "hv1"),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.body.contains("only an agent token reports for a host"));
}

#[tokio::test]
async fn an_admin_adds_a_user_who_can_then_log_in() {
    let s = server().await;
    let admin = s.login("ada", "admin").await;
    let short = post(
        &s,
        &admin,
        "/settings/users",
        &[
            ("name", "carl"),
            ("role", "viewer"),
            ("password", "short"),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(short.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(short.body.contains("at least 10 characters"));
    let added = post(
        &s,
        &admin,
        "/settings/users",
        &[
            ("name", "carl"),
            ("role", "viewer"),
            ("password", PASSWORD),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    assert!(added.body.contains("User carl added."));
    let twice = post(
        &s,
        &admin,
        "/settings/users",
        &[
            ("name", "carl"),
            ("role", "viewer"),
            ("password", PASSWORD),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    // The user `login` creates would clash; carl exists, so login only logs him in.
    let carl = s.login("carl", "viewer").await;
    assert!(s.page("/", &carl).await.body.contains("carl (viewer)"));
}

#[tokio::test]
async fn the_cost_model_saved_is_used_everywhere_and_kept() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let admin = s.login("ada", "admin").await;
    let bad = post(
        &s,
        &admin,
        "/settings/cost",
        &[
            ("watts_per_busy_core", "-3"),
            ("price_per_kwh", "0.4"),
            ("currency", "CHF"),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(s.db.setting("cost_model").await.unwrap(), None);

    let saved = post(
        &s,
        &admin,
        "/settings/cost",
        &[
            ("watts_per_busy_core", "10"),
            ("price_per_kwh", "0.5"),
            ("currency", "CHF"),
            ("csrf", &admin.csrf),
        ],
    )
    .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.body);
    let overview = s.page("/", &admin).await;
    assert!(
        overview
            .body
            .contains("at 10 W per busy core and 0.5 CHF per kWh"),
        "{}",
        overview.body
    );
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    assert_eq!(api.json()["totals"]["cost_model"]["currency"], "CHF");
    // A restarted server keeps it.
    let restarted = AppState::new(s.db.clone(), Options::default())
        .await
        .unwrap();
    assert_eq!(restarted.cost_model().watts_per_busy_core, 10.0);
}
