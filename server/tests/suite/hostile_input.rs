//! Hostile input at the dashboard's forms (issue 14): every field has a length it may not pass,
//! refused before any work and without being kept; guesses at the current password are
//! throttled like logins.

use crate::common;

use axum::http::{Method, StatusCode};

use common::{PASSWORD, form, server};

#[tokio::test]
async fn a_login_name_too_long_is_refused_before_the_throttle_and_nothing_is_kept() {
    let s = server().await;
    // 65 characters: one more than a user name may have; the page says why.
    let reply = s.submit_login(&"a".repeat(65), "guess").await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("name: must be at most 64 characters"),
        "{}",
        reply.body
    );
    // 1.5 MB, as in the issue: refused unread beyond the form's bound.
    for _ in 0..3 {
        let reply = s.submit_login(&"b".repeat(1_500_000), "guess").await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    }
    assert_eq!(s.state.login_throttle.names(), 0, "a refused name was kept");
    // A name of the longest length is an ordinary (failed) login, and is remembered.
    let reply = s.submit_login(&"c".repeat(64), "guess").await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(s.state.login_throttle.names(), 1);
}

/// A form's path, its fields, and the one that is too long.
type Case<'a> = (String, Vec<(&'a str, String)>, &'a str);

#[tokio::test]
async fn every_form_refuses_a_field_one_character_too_long() {
    let s = server().await;
    let admin = s.login("alice", "admin").await;
    let bob_id = {
        s.login("bob", "viewer").await;
        s.db.user_by_name("bob").await.unwrap().unwrap().id
    };
    let long = |n: usize| "x".repeat(n + 1);
    let csrf = admin.csrf.as_str();
    let users = format!("/settings/users/{bob_id}");
    let cases: Vec<Case> = vec![
        (
            "/settings/tokens".into(),
            vec![("name", long(64)), ("role", "agent".into())],
            "name",
        ),
        (
            "/settings/tokens".into(),
            vec![
                ("name", "t".into()),
                ("role", "agent".into()),
                ("host", long(256)),
            ],
            "host",
        ),
        (
            "/settings/users".into(),
            vec![
                ("name", long(64)),
                ("role", "viewer".into()),
                ("password", PASSWORD.into()),
            ],
            "name",
        ),
        (
            "/settings/users".into(),
            vec![
                ("name", "carol".into()),
                ("role", "viewer".into()),
                ("password", long(1024)),
            ],
            "password",
        ),
        (format!("{users}/role"), vec![("role", long(32))], "role"),
        (
            format!("{users}/password"),
            vec![("password", long(1024))],
            "password",
        ),
        (
            "/settings/cost".into(),
            vec![
                ("watts_per_busy_core", long(32)),
                ("price_per_kwh", "0.2".into()),
                ("currency", "EUR".into()),
            ],
            "watts_per_busy_core",
        ),
        (
            "/settings/cost".into(),
            vec![
                ("watts_per_busy_core", "7".into()),
                ("price_per_kwh", "0.2".into()),
                ("currency", long(8)),
            ],
            "currency",
        ),
        (
            "/alerts/silences".into(),
            vec![
                ("pattern", "web-*".into()),
                ("hours", "1".into()),
                ("reason", long(256)),
            ],
            "reason",
        ),
        (
            "/alerts/rules".into(),
            vec![
                ("name", "r".into()),
                ("kind", "guest_waste".into()),
                ("scope", "name".into()),
                ("scope_value", long(256)),
                ("threshold", "1".into()),
                ("minutes", "5".into()),
                ("severity", "info".into()),
            ],
            "scope_value",
        ),
        (
            "/alerts/receivers".into(),
            vec![
                ("name", "hook".into()),
                ("url", format!("https://example.com/{}", long(2048))),
                ("format", "json".into()),
            ],
            "url",
        ),
        (
            "/account/password".into(),
            vec![
                ("current", long(1024)),
                ("password", "another long password".into()),
                ("again", "another long password".into()),
            ],
            "current",
        ),
        ("/logout".into(), vec![], "csrf"),
    ];
    for (path, fields, too_long) in cases {
        let mut fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let forged_csrf = long(64);
        fields.push((
            "csrf",
            if too_long == "csrf" {
                &forged_csrf
            } else {
                csrf
            },
        ));
        let reply = s.post_form(&admin, &path, &fields).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {}",
            reply.body
        );
        assert!(
            reply.body.contains(&format!("{too_long}: must be at most")),
            "{path}: {}",
            reply.body
        );
    }
    // Nothing was made, and the session still works.
    assert_eq!(s.db.users().await.unwrap().len(), 2);
    assert_eq!(s.page("/settings", &admin).await.status, StatusCode::OK);
    // A field no form of ours has is refused too.
    let reply = s
        .post_form(&admin, "/logout", &[("csrf", csrf), ("extra", "x")])
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn wrong_current_passwords_are_held_back_like_failed_logins() {
    let s = server().await;
    let alice = s.login("alice", "viewer").await;
    let change = |current: &'static str| {
        let alice = alice.clone();
        let s = &s;
        async move {
            s.post_form(
                &alice,
                "/account/password",
                &[
                    ("csrf", &alice.csrf),
                    ("current", current),
                    ("password", "another long password"),
                    ("again", "another long password"),
                ],
            )
            .await
        }
    };
    for _ in 0..5 {
        let reply = change("a wrong guess").await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            reply.body
        );
    }
    // Even the right password waits now, and the page says for how long.
    let held = change(PASSWORD).await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.body);
    assert!(held.body.contains("try again in 2 s"), "{}", held.body);
    // The same password, whichever door: the login form holds the name back too.
    assert_eq!(
        s.submit_login("alice", PASSWORD).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The password did not change.
    let row = s.db.user_by_name("alice").await.unwrap().unwrap();
    assert!(tickscope_server::auth::verify_password(
        PASSWORD,
        &row.password_hash
    ));
}

#[tokio::test]
async fn a_cross_site_post_is_refused_even_with_a_valid_session_and_token() {
    let s = server().await;
    let admin = s.login("alice", "admin").await;
    let token_form =
        |name: &str| form(&[("csrf", &admin.csrf), ("name", name), ("role", "viewer")]);
    let post = |name: &'static str, headers: &'static [(&'static str, &'static str)]| {
        let body = token_form(name);
        let s = &s;
        let cookie = admin.cookie.clone();
        async move {
            s.browse_with(
                Method::POST,
                "/settings/tokens",
                Some(&cookie),
                Some(body),
                headers,
            )
            .await
        }
    };
    let cross_site: [&[(&str, &str)]; 3] = [
        &[("sec-fetch-site", "cross-site")],
        // A sibling subdomain is another origin.
        &[
            ("sec-fetch-site", "same-site"),
            ("origin", "https://other.tickscope.example"),
            ("host", "tickscope.example"),
        ],
        // A browser without Sec-Fetch-Site: its Origin names another host.
        &[
            ("origin", "https://evil.example"),
            ("host", "tickscope.example"),
        ],
    ];
    for headers in cross_site {
        let reply = post("forged", headers).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{headers:?}");
    }
    assert!(
        s.db.tokens()
            .await
            .unwrap()
            .iter()
            .all(|t| t.name != "forged"),
        "a cross-site form made a token"
    );
    let same_origin: [&[(&str, &str)]; 3] = [
        &[("sec-fetch-site", "same-origin")],
        &[
            ("origin", "http://tickscope.example"),
            ("host", "tickscope.example"),
        ],
        // No browser headers at all: a script, or an agent.
        &[],
    ];
    for (i, headers) in same_origin.into_iter().enumerate() {
        let name = ["ours-1", "ours-2", "ours-3"][i];
        let reply = post(name, headers).await;
        assert_eq!(
            reply.status,
            StatusCode::SEE_OTHER,
            "{headers:?}: {}",
            reply.body
        );
    }
    // The login form too: a cross-site login (login CSRF) is refused.
    let reply = s
        .browse_with(
            Method::POST,
            "/login",
            None,
            Some(form(&[("name", "alice"), ("password", PASSWORD)])),
            &[("sec-fetch-site", "cross-site")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // An agent's report carries neither header and is stored.
    let reply = s
        .post_report(Some(&s.agent_token), &common::fleet_report(1))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

/// One HTTP/1.1 exchange over a new connection: the status, the `Set-Cookie` values and the body.
fn http(url: &str, request: &str) -> (u16, Vec<String>, String) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply).to_string();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let cookies = head
        .lines()
        .filter_map(|l| l.strip_prefix("set-cookie: "))
        .map(|c| c.split(';').next().unwrap().to_string())
        .collect();
    (status, cookies, body.to_string())
}

/// The login form posted as a browser would (its CSRF cookie and token), over real HTTP.
fn post_login(url: &str, name: &str) -> u16 {
    let host = url.trim_start_matches("http://");
    let (_, cookies, page) = http(
        url,
        &format!("GET /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    );
    let csrf = common::csrf_in(&page).expect("the login page carries a CSRF token");
    let body = form(&[
        ("name", name),
        ("password", "a wrong guess"),
        ("csrf", &csrf),
    ]);
    let (status, _, _) = http(
        url,
        &format!(
            "POST /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nCookie: {}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            cookies.join("; "),
            body.len()
        ),
    );
    status
}

#[test]
fn hostile_login_names_cannot_forge_colour_or_reverse_a_line_of_the_real_servers_log() {
    use common::processes::{Processes, start_server_with_log};
    let dir = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    // The default log level: TICKSCOPE_LOG unset.
    let (url, log) = start_server_with_log(dir.path().join("t.db"), &[], &[], &mut processes);
    let forged = "INFO tickscope_server::web::login: logged in user=alice";
    let names = [
        format!("mallory\n{forged}"),
        format!("mallory\r{forged}"),
        format!("mallory\r\n{forged}"),
        "\u{1b}[31mred\u{1b}[0m\u{1b}[2K\u{1b}[1A".to_string(),
        "nimda\u{202e}".to_string(),
        "ali\u{200b}ce\u{2066}\u{feff}".to_string(),
        "nul\0del\u{7f}c1\u{9b}".to_string(),
    ];
    for name in &names {
        assert_eq!(post_login(&url, name), 401, "{name:?}");
    }
    // Too long to be anyone's name: refused unread, not logged.
    assert_eq!(
        post_login(&url, &format!("{}\n{forged}", "x".repeat(100))),
        422
    );
    // Wait for the log to show every refusal (the server logs it before it answers).
    let refused = || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|l| String::from_utf8_lossy(l).contains("login refused"))
            .count()
    };
    for _ in 0..100 {
        if refused() >= names.len() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let lines = log.lock().unwrap().clone();
    assert_eq!(refused(), names.len(), "{lines:#?}");
    for line in &lines {
        let text = String::from_utf8(line.clone()).expect("the log is UTF-8");
        let body = text
            .strip_suffix('\n')
            .expect("every line ends with a newline");
        assert!(
            !body.chars().any(tickscope_server::visible::must_escape),
            "a control, bidi or zero-width character reached the log: {body:?}"
        );
        assert!(!body.starts_with("INFO"), "a forged line: {body:?}");
        assert!(
            !body.contains("logged in user=alice") || body.contains("login refused"),
            "{body:?}"
        );
    }
    // Each name is there, escaped, on its own line.
    let log_text: String = lines.iter().map(|l| String::from_utf8_lossy(l)).collect();
    for shown in [
        r"mallory\nINFO",
        r"mallory\rINFO",
        r"\u{1b}[31mred",
        r"nimda\u{202e}",
        r"ali\u{200b}ce",
    ] {
        assert!(
            log_text.contains(shown),
            "{shown} is not in the log:\n{log_text}"
        );
    }
}
