//! Dashboard logins: sessions, CSRF, and what needs a login.

use crate::common;

use std::process::{Command, Stdio};

use axum::http::{Method, StatusCode};

use common::processes::output_with_stdin;
use common::{PASSWORD, csrf_in, fleet_report, form, manual_clock, server, server_with_clock};
use tickscope_server::state::Options;

#[tokio::test]
async fn every_page_sends_a_visitor_without_a_session_to_the_login_page() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    for (path, next) in [
        ("/", "/"),
        ("/plan", "/plan"),
        ("/guests", "/guests"),
        ("/guests/1", "/guests/1"),
        ("/hosts", "/hosts"),
        ("/hosts/1", "/hosts/1"),
        ("/alerts", "/alerts"),
        ("/alerts/rules/1", "/alerts/rules/1"),
        ("/settings", "/settings"),
        ("/account", "/account"),
        // The query as the browser sent it comes back after login: encoded once more here.
        ("/guests/1?x=a b", "/guests/1%3Fx%3Da%2520b"),
    ] {
        let reply = s
            .browse(Method::GET, &path.replace(' ', "%20"), None, None)
            .await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{path}");
        assert_eq!(reply.location, format!("/login?next={next}"), "{path}");
    }
    // The read API wants a token or a login; health checks and the stylesheet want neither.
    let api = s.browse(Method::GET, "/api/v1/guests", None, None).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    for open in ["/healthz", "/static/style.css", "/login"] {
        let reply = s.browse(Method::GET, open, None, None).await;
        assert_eq!(reply.status, StatusCode::OK, "{open}");
    }
}

#[tokio::test]
async fn logging_in_opens_the_dashboard_and_the_read_api() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let login = s.login("alice", "viewer").await;
    let home = s.page("/", &login).await;
    assert!(home.body.contains("alice (viewer)"), "{}", home.body);
    let api = s
        .browse(Method::GET, "/api/v1/guests", Some(&login.cookie), None)
        .await;
    assert_eq!(api.status, StatusCode::OK, "{}", api.body);
    assert_eq!(api.json()["guests"].as_array().unwrap().len(), 3);
    // A login reads; it does not report for a host.
    let report = s
        .browse(
            Method::POST,
            "/api/v1/reports",
            Some(&login.cookie),
            Some(fleet_report(2).to_string()),
        )
        .await;
    assert_ne!(report.status, StatusCode::OK, "{}", report.body);
    assert_eq!(s.stored().await, (1, 3));
}

#[tokio::test]
async fn a_wrong_password_or_unknown_user_logs_nobody_in() {
    let s = server().await;
    s.login("alice", "admin").await;
    let page = s.browse(Method::GET, "/login", None, None).await;
    let cookie = page.login_cookie.unwrap();
    let csrf = csrf_in(&page.body).unwrap();
    for (name, password) in [("alice", "not the password"), ("mallory", PASSWORD)] {
        let body = form(&[("name", name), ("password", password), ("csrf", &csrf)]);
        let reply = s
            .browse(Method::POST, "/login", Some(&cookie), Some(body))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{name}");
        // The same words for both: no hint which user names exist.
        assert!(reply.body.contains("Unknown user or wrong password."));
        let home = s.browse(Method::GET, "/", Some(&cookie), None).await;
        assert_eq!(home.status, StatusCode::SEE_OTHER, "{name} got in");
    }
}

#[tokio::test]
async fn forms_without_this_sessions_csrf_token_are_refused() {
    let s = server().await;
    s.login("alice", "admin").await;
    let page = s.browse(Method::GET, "/login", None, None).await;
    let cookie = page.login_cookie.unwrap();
    let good = csrf_in(&page.body).unwrap();
    let other_session = csrf_in(&s.browse(Method::GET, "/login", None, None).await.body).unwrap();
    for csrf in [None, Some(""), Some("0000"), Some(other_session.as_str())] {
        let mut fields = vec![("name", "alice"), ("password", PASSWORD)];
        if let Some(csrf) = csrf {
            fields.push(("csrf", csrf));
        }
        let reply = s
            .browse(Method::POST, "/login", Some(&cookie), Some(form(&fields)))
            .await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "login with {csrf:?}");
    }
    let body = form(&[("name", "alice"), ("password", PASSWORD), ("csrf", &good)]);
    let reply = s
        .browse(Method::POST, "/login", Some(&cookie), Some(body))
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);

    // Logging out is a form too.
    let login = s.login("bob", "viewer").await;
    for csrf in [None, Some("0000"), Some(good.as_str())] {
        let fields: Vec<(&str, &str)> = csrf.map(|c| vec![("csrf", c)]).unwrap_or_default();
        let reply = s
            .browse(
                Method::POST,
                "/logout",
                Some(&login.cookie),
                Some(form(&fields)),
            )
            .await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "logout with {csrf:?}");
    }
    assert_eq!(s.page("/", &login).await.status, StatusCode::OK);
}

#[tokio::test]
async fn after_logging_out_the_session_is_refused() {
    let s = server().await;
    let login = s.login("alice", "viewer").await;
    let reply = s
        .browse(
            Method::POST,
            "/logout",
            Some(&login.cookie),
            Some(form(&[("csrf", &login.csrf)])),
        )
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(reply.location, "/login");
    assert_eq!(s.page("/", &login).await.status, StatusCode::SEE_OTHER);
    let api = s
        .browse(Method::GET, "/api/v1/guests", Some(&login.cookie), None)
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn after_login_only_local_paths_are_followed() {
    let s = server().await;
    s.login("alice", "viewer").await;
    for (next, expected) in [
        ("/plan", "/plan"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
    ] {
        let page = s.browse(Method::GET, "/login", None, None).await;
        let cookie = page.login_cookie.unwrap();
        let csrf = csrf_in(&page.body).unwrap();
        let body = form(&[
            ("name", "alice"),
            ("password", PASSWORD),
            ("csrf", &csrf),
            ("next", next),
        ]);
        let reply = s
            .browse(Method::POST, "/login", Some(&cookie), Some(body))
            .await;
        assert_eq!(reply.location, expected, "{next}");
    }
}

#[tokio::test]
async fn the_session_cookie_is_http_only_and_same_site_strict_and_the_login_page_sets_none() {
    let s = server().await;
    s.login("alice", "viewer").await;
    let page = s.browse(Method::GET, "/login", None, None).await;
    // The login form's token has its own cookie: a visitor arriving from another site's link
    // (without the Strict session cookie) does not lose the session they have.
    assert!(page.session_cookie.is_none(), "{}", page.set_cookie);
    let cookie = page.login_cookie.unwrap();
    let csrf = csrf_in(&page.body).unwrap();
    let body = form(&[("name", "alice"), ("password", PASSWORD), ("csrf", &csrf)]);
    let reply = s
        .browse(Method::POST, "/login", Some(&cookie), Some(body))
        .await;
    assert!(
        reply.set_cookie.contains("HttpOnly"),
        "{}",
        reply.set_cookie
    );
    assert!(
        reply.set_cookie.contains("SameSite=Strict"),
        "{}",
        reply.set_cookie
    );
    // Without --secure-cookies (plain HTTP on loopback) it cannot be Secure, or no browser
    // would send it back.
    assert!(!reply.set_cookie.contains("Secure"), "{}", reply.set_cookie);
    // Pages are not kept for the Back button after logout.
    let home = s
        .browse(Method::GET, "/", reply.session_cookie.as_deref(), None)
        .await;
    assert_eq!(home.status, StatusCode::OK);
}

#[test]
fn user_add_reads_the_password_from_stdin_and_refuses_a_short_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("users.db");
    let add = |name: &str, password: &str| {
        output_with_stdin(
            Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
                .args(["user", "add", name, "--role", "admin", "--db"])
                .arg(&db)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            format!("{password}\n").as_bytes(),
        )
    };
    let out = add("carol", PASSWORD);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Created admin user \"carol\""));
    let short = add("dave", "short");
    assert!(!short.status.success());
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("at least 10 characters"),
        "{}",
        String::from_utf8_lossy(&short.stderr)
    );
    let again = add("carol", PASSWORD);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already a user"));
}

#[test]
fn user_passwd_list_and_remove_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("users.db");
    let run = |args: &[&str], stdin: &str| {
        let out = output_with_stdin(
            Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
                .arg("user")
                .args(args)
                .arg("--db")
                .arg(&db)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            format!("{stdin}\n").as_bytes(),
        );
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    assert!(run(&["add", "carol", "--role", "admin"], PASSWORD).0);
    assert!(run(&["add", "dan"], PASSWORD).0);
    let (ok, out, _) = run(&["passwd", "carol"], "carol's new password");
    assert!(
        ok && out.contains("New password set for \"carol\""),
        "{out}"
    );
    let (ok, out, _) = run(&["list"], "");
    assert!(ok, "{out}");
    assert!(
        out.contains("carol") && out.contains("admin") && out.contains("never"),
        "{out}"
    );
    assert!(out.contains("dan") && out.contains("viewer"), "{out}");
    let (ok, _, err) = run(&["remove", "carol"], "");
    assert!(!ok && err.contains("last admin"), "{err}");
    let (ok, _, err) = run(&["passwd", "nobody"], "whatever password");
    assert!(!ok && err.contains("no user \"nobody\""), "{err}");
    assert!(run(&["remove", "dan"], "").0);
    let (_, out, _) = run(&["list"], "");
    assert!(!out.contains("dan"), "{out}");
}

#[tokio::test]
async fn the_guest_list_filters_by_the_address_and_escapes_names() {
    let s = server().await;
    let mut report = fleet_report(1);
    report["guests"][0]["name"] = serde_json::json!("<img src=x onerror=alert(1)>");
    s.post_report(Some(&s.agent_token), &report).await;
    let login = s.login("alice", "viewer").await;

    let all = s.page("/guests", &login).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    assert!(all.body.contains("3 of 3 active guest(s)"), "{}", all.body);
    assert!(
        !all.body.contains("<img src=x"),
        "raw VM name in the guest list"
    );
    assert!(
        all.body.contains("&lt;img src=x onerror=alert(1)&gt;") || all.body.contains("&#60;img")
    );

    let periodic = s.page("/guests?mode=periodic&sort=name", &login).await;
    assert!(
        periodic.body.contains("2 of 3 active guest(s)"),
        "{}",
        periodic.body
    );
    let first = periodic.body.find(">ticker-1<").unwrap();
    let second = periodic.body.find(">ticker-2<").unwrap();
    assert!(first < second, "sorted by name");
    assert!(!periodic.body.contains("onerror=alert"));
    // The chosen filter stays chosen, and sorting links keep it.
    assert!(
        periodic
            .body
            .contains(r#"<option value="periodic" selected>"#)
    );
    let link = "/guests?mode=periodic&sort=name&dir=desc";
    assert!(
        [link.replace('&', "&amp;"), link.replace('&', "&#38;")]
            .iter()
            .any(|l| periodic.body.contains(l.as_str())),
        "{}",
        periodic.body
    );

    let bad = s.page("/guests?page=abc", &login).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn hosts_show_their_agents_and_a_silent_one_stands_out() {
    use tickscope_server::ingest;
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    // A second host whose agent last reported ten minutes ago.
    let mut old = fleet_report(2);
    old["host"]["name"] = serde_json::json!("hv-<quiet>");
    old["agent"]["id"] = serde_json::json!("machine-2");
    let report = serde_json::from_value(old).unwrap();
    let valid = ingest::validate(report, tickscope_server::clock::now_ms()).unwrap();
    let token =
        s.db.insert_token(
            "old",
            tickscope_server::domain::TokenRole::Agent,
            "00",
            None,
            0,
        )
        .await
        .unwrap();
    s.db.store_lone_report(
        &valid,
        token,
        tickscope_server::clock::now_ms() - 10 * 60 * 1000,
        ingest::samples::sample_spans,
    )
    .await
    .unwrap();

    let login = s.login("alice", "viewer").await;
    let hosts = s.page("/hosts", &login).await;
    assert_eq!(hosts.status, StatusCode::OK, "{}", hosts.body);
    assert!(hosts.body.contains("1 host(s) silent"), "{}", hosts.body);
    assert!(!hosts.body.contains("hv-<quiet>"), "raw host name");
    let silent_row = hosts.body.find("class=\"silent\"").unwrap();
    let quiet = hosts.body.find("hv-&").unwrap();
    let live = hosts.body.find(">hv1<").unwrap();
    assert!(
        silent_row < quiet && quiet < live,
        "the silent host comes first"
    );
    assert!(hosts.body.contains("0.1.0"), "agent version");

    let id =
        s.db.hosts()
            .await
            .unwrap()
            .into_iter()
            .find(|h| h.name == "hv1")
            .unwrap()
            .id;
    let host = s.page(&format!("/hosts/{id}"), &login).await;
    assert_eq!(host.status, StatusCode::OK, "{}", host.body);
    for text in [
        ">ticker-1<",
        ">ticker-2<",
        ">quiet<",
        "qemu 0.50 % per vCPU (default)",
    ] {
        assert!(host.body.contains(text), "{text}: {}", host.body);
    }
    assert!(!host.body.contains("Silent:"));
    assert_eq!(
        s.page("/hosts/999", &login).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_guest_page_charts_its_history_and_marks_a_kernel_change() {
    let s = server().await;
    let facts = |release: &str| {
        serde_json::json!({"source": "probe_channel", "received_ms": tickscope_server::clock::now_ms(),
                           "facts": {"kernel_release": release, "idle_fraction": 0.99}})
    };
    for (seq, release) in [(1, "6.1.0-57"), (2, "6.12<script>alert(1)</script>")] {
        let mut r = fleet_report(seq);
        r["guests"][1]["facts"] = facts(release);
        s.post_report(Some(&s.agent_token), &r).await;
    }
    let login = s.login("alice", "viewer").await;
    let id = s
        .browse(Method::GET, "/api/v1/guests", Some(&login.cookie), None)
        .await
        .json()["guests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "ticker-1")
        .unwrap()["id"]
        .clone();
    let page = s.page(&format!("/guests/{id}"), &login).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.body.matches("<svg").count(), 4, "four charts");
    assert!(page.body.contains("<polyline"), "with lines");
    assert_eq!(
        page.body.matches("class=\"mark\"").count(),
        4,
        "the change marked on each"
    );
    assert!(
        !page.body.contains("<script>alert(1)"),
        "raw kernel string in a chart"
    );
    assert!(
        page.body.contains("kernel 6.12&#60;script&#62;")
            || page.body.contains("kernel 6.12&lt;script&gt;")
    );
    for range in ["1h", "24h", "7d", "30d"] {
        let page = s.page(&format!("/guests/{id}?range={range}"), &login).await;
        assert_eq!(page.status, StatusCode::OK, "{range}");
        assert!(
            page.body
                .contains(&format!("<strong aria-current=\"true\">{range}</strong>"))
        );
    }
    let bad = s.page(&format!("/guests/{id}?range=1y"), &login).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_overview_links_every_figure_to_the_list_behind_it() {
    let s = server().await;
    let guests: Vec<serde_json::Value> = (0..12)
        .map(|i| common::guest(&format!("g{i:02}"), 1, 5.3, 650.0, Some("nohz=off")))
        .chain([common::guest("quiet", 1, 0.3, 38.0, None)])
        .collect();
    s.post_report(Some(&s.agent_token), &common::report(1, guests))
        .await;
    let login = s.login("alice", "viewer").await;
    let overview = s.page("/", &login).await;
    for link in [
        "href=\"/guests\"",
        "href=\"/hosts\"",
        "href=\"/guests?mode=wasteful\"",
        "href=\"/guests?mode=periodic\"",
        "href=\"/guests?mode=tickless\"",
    ] {
        assert!(overview.body.contains(link), "{link} missing");
    }
    // Only the worst ten are listed here; all thirteen are one click away.
    assert_eq!(overview.body.matches("<td><a href=\"/guests/").count(), 10);
    assert!(overview.body.contains("All 13 guests"));
    // A wall screen stays current: the page reloads itself, without JavaScript.
    assert!(
        overview
            .body
            .contains("<meta http-equiv=\"refresh\" content=\"60\">")
    );
    // The host table is the hosts page's: each host links to its page and to its guests.
    let host_id = s.db.hosts().await.unwrap()[0].id;
    assert!(
        overview
            .body
            .contains(&format!("href=\"/hosts/{host_id}\""))
    );
    assert!(
        overview
            .body
            .contains("href=\"/guests?host=hv1&amp;mode=wasteful\">12<")
    );
    let ticking = s.page("/guests?mode=wasteful", &login).await;
    assert!(
        ticking.body.contains("12 of 13 active guest(s)"),
        "{}",
        ticking.body
    );
}

#[tokio::test]
async fn repeated_wrong_passwords_hold_a_name_back_known_or_not() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    s.login("alice", "viewer").await;
    for _ in 0..5 {
        let wrong = s.submit_login("alice", "not the password").await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    }
    // Even the right password waits now, and the page says for how long.
    let held = s.submit_login("Alice", PASSWORD).await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.body);
    assert!(held.body.contains("try again in 2 s"), "{}", held.body);
    // Another account is not affected.
    s.login("bob", "viewer").await;
    // A name nobody has is held back the same way: nothing tells the two apart.
    for _ in 0..5 {
        s.submit_login("mallory", "guess").await;
    }
    assert_eq!(
        s.submit_login("mallory", "guess").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The two seconds' wait passes.
    clock.advance_ms(2100);
    assert_eq!(
        s.submit_login("alice", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
}

/// User names are one whatever their ASCII case, and only their ASCII case, on either backend:
/// SQLite's NOCASE folds A-Z only, and PostgreSQL is made to do the same whatever its locale.
#[tokio::test]
async fn user_names_fold_ascii_case_only() {
    use tickscope_server::db::StoreError;
    use tickscope_server::domain::UserRole;
    let s = server().await;
    let hash = tickscope_server::auth::hash_password("a long enough password").unwrap();
    s.db.insert_user("Alice", UserRole::Viewer, &hash, 0)
        .await
        .unwrap();
    let taken = s.db.insert_user("ALICE", UserRole::Viewer, &hash, 0).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(
        s.db.user_by_name("aLiCe").await.unwrap().unwrap().name,
        "Alice"
    );
    // Beyond ASCII, case is not folded: two users.
    s.db.insert_user("Jürgen", UserRole::Viewer, &hash, 0)
        .await
        .unwrap();
    s.db.insert_user("JÜRGEN", UserRole::Viewer, &hash, 0)
        .await
        .unwrap();
    assert_eq!(
        s.db.user_by_name("jÜrgen").await.unwrap().unwrap().name,
        "JÜRGEN"
    );
    assert_eq!(
        s.db.user_by_name("JüRGEN").await.unwrap().unwrap().name,
        "Jürgen"
    );
}
