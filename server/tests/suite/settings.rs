//! The settings page: tokens, users and the cost model, for admins only, every form with CSRF.

use crate::common;

use axum::http::{Method, StatusCode};

use common::{Login, PASSWORD, fleet_report, form, server};
use tickscope_server::state::{AppState, Options};

/// A form that did its work: redirected back to the settings page, which is then shown.
async fn done(s: &common::Server, login: &Login, reply: common::Reply) -> common::Reply {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(
        reply.location.starts_with("/settings#"),
        "{}",
        reply.location
    );
    s.page("/settings", login).await
}

/// The forms of the settings page, with valid values, without their CSRF token; user 2 is
/// another admin than the one sending them.
const FORMS: [(&str, &[(&str, &str)]); 7] = [
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
    ("/settings/users/2/role", &[("role", "viewer")]),
    (
        "/settings/users/2/password",
        &[("password", "another long password")],
    ),
    ("/settings/users/2/remove", &[]),
];

/// What the forms could change: tokens, users (with role and password), the cost model.
type Settings = (usize, Vec<(String, String, String)>, String, Option<i64>);

async fn state_of(s: &common::Server) -> Settings {
    let tokens = s.db.tokens().await.unwrap();
    let revoked = tokens
        .iter()
        .find(|t| t.id == tickscope_server::domain::TokenId(1))
        .and_then(|t| t.revoked_ms);
    let users = s.db.users().await.unwrap();
    (
        tokens.len(),
        users
            .into_iter()
            .map(|u| (u.name, u.role.to_string(), u.password_hash))
            .collect(),
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
    s.login("ada", "admin").await;
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
        let reply = s.post_form(&viewer, path, &fields).await;
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
    common::assert_forms_need_this_sessions_csrf(&s, &admin, &other, &FORMS).await;
    assert_eq!(state_of(&s).await, before);
}

#[tokio::test]
async fn a_new_token_is_shown_once_works_and_can_be_revoked() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let admin = s.login("ada", "admin").await;
    let reply = s
        .post_form(
            &admin,
            "/settings/tokens",
            &[
                ("name", "grafana <reader>"),
                ("role", "viewer"),
                ("csrf", &admin.csrf),
            ],
        )
        .await;
    let shown = done(&s, &admin, reply).await;
    let at = shown.body.find("tks_").expect("the new token is shown");
    let token: String = shown.body[at..].chars().take(68).collect();
    assert!(!shown.body.contains("grafana <reader>"), "raw token name");
    // It reads the API.
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&token), None)
        .await;
    assert_eq!(api.status, StatusCode::OK);
    // Never shown again, and reloading the page made no other token.
    let tokens = s.db.tokens().await.unwrap().len();
    let again = s.page("/settings", &admin).await;
    assert!(!again.body.contains(&token));
    assert_eq!(s.db.tokens().await.unwrap().len(), tokens);
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
    let revoke = s
        .post_form(
            &admin,
            &format!("/settings/tokens/{id}/revoke"),
            &[("csrf", &admin.csrf)],
        )
        .await;
    assert!(
        done(&s, &admin, revoke)
            .await
            .body
            .contains("Token revoked")
    );
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&token), None)
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    // A token only an agent may bind to a host.
    let bad = s
        .post_form(
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
    assert!(bad.body.contains("bound to no host"), "{}", bad.body);
}

#[tokio::test]
async fn an_admin_adds_a_user_who_can_then_log_in() {
    let s = server().await;
    let admin = s.login("ada", "admin").await;
    let short = s
        .post_form(
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
    let added = s
        .post_form(
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
    assert!(
        done(&s, &admin, added)
            .await
            .body
            .contains("User carl added.")
    );
    let twice = s
        .post_form(
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
    let bad = s
        .post_form(
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

    let saved = s
        .post_form(
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
    assert!(
        done(&s, &admin, saved)
            .await
            .body
            .contains("Cost model saved")
    );
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

/// A user id by name.
async fn id_of(s: &common::Server, name: &str) -> tickscope_server::domain::UserId {
    s.db.user_by_name(name).await.unwrap().unwrap().id
}

#[tokio::test]
async fn an_admin_changes_roles_sets_passwords_and_removes_users_but_never_the_last_admin() {
    let s = server().await;
    let admin = s.login("ada", "admin").await;
    let carl = s.login("carl", "viewer").await;
    let carl_id = id_of(&s, "carl").await;
    let ada_id = id_of(&s, "ada").await;
    let path =
        |id: tickscope_server::domain::UserId, what: &str| format!("/settings/users/{id}/{what}");

    let promoted = s
        .post_form(
            &admin,
            &path(carl_id, "role"),
            &[("role", "admin"), ("csrf", &admin.csrf)],
        )
        .await;
    assert!(
        done(&s, &admin, promoted)
            .await
            .body
            .contains("carl is now admin.")
    );
    // At once: carl's open session now sees the settings page.
    assert_eq!(s.page("/settings", &carl).await.status, StatusCode::OK);

    // A new password set by an admin logs carl out and the old one stops working.
    let reset = s
        .post_form(
            &admin,
            &path(carl_id, "password"),
            &[("password", "carl's new password"), ("csrf", &admin.csrf)],
        )
        .await;
    assert!(
        done(&s, &admin, reset)
            .await
            .body
            .contains("New password set for carl")
    );
    let after = s.page("/", &carl).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "carl's session ended");
    assert_eq!(
        s.submit_login("carl", PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        s.submit_login("carl", "carl's new password").await.status,
        StatusCode::SEE_OTHER
    );

    // Nobody changes their own account here, so an admin cannot lock themselves out.
    let before = state_of(&s).await;
    for (what, fields) in [
        ("role", vec![("role", "viewer")]),
        ("password", vec![("password", "ada's new password")]),
        ("remove", vec![]),
    ] {
        let mut fields = fields;
        fields.push(("csrf", &admin.csrf));
        let reply = s.post_form(&admin, &path(ada_id, what), &fields).await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{what}");
        assert!(reply.body.contains("account page"), "{}", reply.body);
    }
    assert_eq!(state_of(&s).await, before);

    let removed = s
        .post_form(&admin, &path(carl_id, "remove"), &[("csrf", &admin.csrf)])
        .await;
    assert!(
        done(&s, &admin, removed)
            .await
            .body
            .contains("User carl removed")
    );
    assert!(s.db.user_by_name("carl").await.unwrap().is_none());
    let missing = s
        .post_form(&admin, &path(carl_id, "remove"), &[("csrf", &admin.csrf)])
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let bad_role = s
        .post_form(
            &admin,
            &path(tickscope_server::domain::UserId(ada_id.0 + 100), "role"),
            &[("role", "root"), ("csrf", &admin.csrf)],
        )
        .await;
    assert_eq!(bad_role.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_last_admin_stays_an_admin() {
    let s = server().await;
    let ada = id_of_new(&s, "ada", "admin").await;
    let cleo = id_of_new(&s, "cleo", "admin").await;
    // One admin demotes the other: allowed while another admin is left.
    s.db.set_role(cleo, tickscope_server::domain::UserRole::Viewer)
        .await
        .unwrap();
    let refused = [
        s.db.set_role(ada, tickscope_server::domain::UserRole::Viewer)
            .await
            .unwrap_err(),
        s.db.delete_user(ada).await.unwrap_err(),
    ];
    for e in refused {
        assert!(e.to_string().contains("last admin"), "{e}");
    }
    assert_eq!(s.db.user_by_id(ada).await.unwrap().unwrap().role, "admin");
    s.db.set_role(cleo, tickscope_server::domain::UserRole::Admin)
        .await
        .unwrap();
    s.db.delete_user(ada).await.unwrap();
}

async fn id_of_new(s: &common::Server, name: &str, role: &str) -> tickscope_server::domain::UserId {
    s.login(name, role).await;
    id_of(s, name).await
}

#[tokio::test]
async fn changing_your_password_ends_your_other_sessions_only() {
    let s = server().await;
    let here = s.login("vera", "viewer").await;
    let elsewhere = s.login("vera", "viewer").await;
    let page = s.page("/account", &here).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Change your password"));
    let change = |current: &'static str, new: &'static str, again: &'static str| {
        let csrf = here.csrf.clone();
        let s = &s;
        let here = &here;
        async move {
            s.browse(
                Method::POST,
                "/account/password",
                Some(&here.cookie),
                Some(form(&[
                    ("current", current),
                    ("password", new),
                    ("again", again),
                    ("csrf", &csrf),
                ])),
            )
            .await
        }
    };
    let hash =
        s.db.user_by_name("vera")
            .await
            .unwrap()
            .unwrap()
            .password_hash;
    for (current, new, again, why) in [
        (
            "wrong password!",
            "vera's new password",
            "vera's new password",
            "not your current password",
        ),
        (
            PASSWORD,
            "vera's new password",
            "vera's other password",
            "differs from the new password",
        ),
        (PASSWORD, "short", "short", "at least 10 characters"),
    ] {
        let reply = change(current, new, again).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        assert!(reply.body.contains(why), "{}", reply.body);
    }
    assert_eq!(
        s.db.user_by_name("vera")
            .await
            .unwrap()
            .unwrap()
            .password_hash,
        hash
    );

    let changed = change(PASSWORD, "vera's new password", "vera's new password").await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    let cookie = changed
        .session_cookie
        .clone()
        .unwrap_or(here.cookie.clone());
    let shown = s.browse(Method::GET, "/account", Some(&cookie), None).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(shown.body.contains("Password changed."));
    assert_eq!(
        s.page("/", &elsewhere).await.status,
        StatusCode::SEE_OTHER,
        "the other session ended"
    );
    assert_eq!(
        s.submit_login("vera", PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    // Without this session's CSRF token, nothing changes.
    let forged = s
        .browse(
            Method::POST,
            "/account/password",
            Some(&cookie),
            Some(form(&[
                ("current", "vera's new password"),
                ("password", "mallory's password"),
                ("again", "mallory's password"),
            ])),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
}
