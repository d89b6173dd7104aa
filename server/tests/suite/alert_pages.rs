//! `/alerts` and the alert sections of other pages: forms for admins only, each with CSRF,
//! and names from VMs escaped.

use crate::common;

use axum::http::StatusCode;

use common::{Login, Server, fleet_report, server};
use tickscope_server::alerts;

/// A form that did its work: back to `/alerts`, which then says what was done.
async fn done(s: &Server, login: &Login, reply: common::Reply) -> String {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert!(reply.location.starts_with("/alerts#"), "{}", reply.location);
    let page = s.page("/alerts", login).await;
    assert_eq!(page.status, StatusCode::OK);
    page.body
}

/// The forms of the alerts page with valid values, without their CSRF token.
const FORMS: [(&str, &[(&str, &str)]); 9] = [
    (
        "/alerts/rules",
        &[
            ("name", "r"),
            ("kind", "guest_waste"),
            ("scope", "all"),
            ("threshold", "1"),
            ("minutes", "1"),
            ("severity", "info"),
            ("enabled", "on"),
        ],
    ),
    (
        "/alerts/rules/1",
        &[
            ("name", "r"),
            ("kind", "guest_waste"),
            ("scope", "all"),
            ("threshold", "1"),
            ("minutes", "1"),
            ("severity", "info"),
        ],
    ),
    ("/alerts/rules/1/delete", &[]),
    ("/alerts/silences", &[("hours", "1"), ("reason", "r")]),
    ("/alerts/silences/1/expire", &[]),
    (
        "/alerts/receivers",
        &[
            ("name", "r"),
            ("url", "http://127.0.0.1:9/"),
            ("format", "json"),
        ],
    ),
    (
        "/alerts/receivers/1",
        &[
            ("name", "r"),
            ("url", "http://127.0.0.1:9/"),
            ("format", "json"),
            ("auth_header", "Bearer stolen"),
        ],
    ),
    ("/alerts/receivers/1/delete", &[]),
    ("/alerts/1/ack", &[]),
];

/// Everything the alert forms could change.
async fn snapshot(s: &Server) -> String {
    format!(
        "{:?} {:?} {:?} {:?}",
        s.db.alert_rules().await.unwrap(),
        s.db.silences(0).await.unwrap(),
        s.db.receivers().await.unwrap(),
        s.db.open_alerts().await.unwrap()
    )
}

/// A server with one silence, one receiver and one firing alert, so that every form has
/// something to act on.
async fn furnished() -> Server {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    common::set_guest_rule(&s.db, 0, true).await;
    let now = tickscope_server::clock::now_ms();
    s.db.insert_silence(None, "nothing-*", now, now + 60_000, "r", "t", now)
        .await
        .unwrap();
    s.db.insert_receiver(
        &tickscope_server::db::ReceiverSettings::new("r0", "http://127.0.0.1:9/", "json"),
        now,
    )
    .await
    .unwrap();
    alerts::evaluate(&s.state, now).await.unwrap();
    assert!(!s.db.open_alerts().await.unwrap().is_empty());
    s
}

#[tokio::test]
async fn a_viewer_reads_the_alerts_page_and_changes_nothing() {
    let s = furnished().await;
    let viewer = s.login("victor", "viewer").await;
    let page = s.page("/alerts", &viewer).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Firing (2)"), "{}", page.body);
    assert!(
        page.body.contains("<td>built in</td>"),
        "the default rules, unchanged"
    );
    assert!(
        !page.body.contains("action=\"/alerts/rules\""),
        "no forms for a viewer"
    );
    assert_eq!(
        s.page("/alerts/rules/1", &viewer).await.status,
        StatusCode::FORBIDDEN
    );
    let before = snapshot(&s).await;
    for (path, fields) in FORMS {
        let mut fields = fields.to_vec();
        fields.push(("csrf", &viewer.csrf));
        let reply = s.post_form(&viewer, path, &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(snapshot(&s).await, before);
}

#[tokio::test]
async fn every_alerts_form_needs_this_sessions_csrf_token() {
    let s = furnished().await;
    let admin = s.login("ada", "admin").await;
    let other = s.login("bob", "admin").await;
    let before = snapshot(&s).await;
    common::assert_forms_need_this_sessions_csrf(&s, &admin, &other, &FORMS).await;
    assert_eq!(snapshot(&s).await, before);
}

#[tokio::test]
async fn an_admin_manages_rules_silences_receivers_and_acknowledges() {
    let s = furnished().await;
    let admin = s.login("ada", "admin").await;
    let csrf = admin.csrf.as_str();

    let added = s
        .post_form(
            &admin,
            "/alerts/rules",
            &[
                ("name", "Busy <lab> guests"),
                ("kind", "guest_waste"),
                ("scope", "name"),
                ("scope_value", "lab-*"),
                ("threshold", "5"),
                ("minutes", "30"),
                ("severity", "critical"),
                ("enabled", "on"),
                ("csrf", csrf),
            ],
        )
        .await;
    let page = done(&s, &admin, added).await;
    assert!(
        page.contains("Rule Busy &#60;lab&#62; guests added.")
            || page.contains("Rule Busy &lt;lab&gt; guests added."),
        "{page}"
    );
    let rules = s.db.alert_rules().await.unwrap();
    let rule = rules
        .iter()
        .find(|r| r.settings.name == "Busy <lab> guests")
        .unwrap();
    assert_eq!(
        (
            rule.settings.scope.as_str(),
            rule.settings.scope_value.as_str(),
            rule.settings.duration_s
        ),
        ("name", "lab-*", 1800)
    );
    assert!(rule.settings.enabled);

    // Refused whole, with the reason: a name scope for an agent-silence rule, a bad number.
    for (fields, why) in [
        (
            vec![
                ("kind", "host_silent"),
                ("scope", "name"),
                ("scope_value", "x"),
                ("threshold", "60"),
            ],
            "scope",
        ),
        (
            vec![
                ("kind", "guest_waste"),
                ("scope", "all"),
                ("threshold", "-1"),
            ],
            "threshold",
        ),
        (
            vec![
                ("kind", "guest_waste"),
                ("scope", "host"),
                ("threshold", "1"),
            ],
            "scope",
        ),
    ] {
        let mut fields = fields;
        fields.extend([
            ("name", "bad"),
            ("minutes", "1"),
            ("severity", "info"),
            ("csrf", csrf),
        ]);
        let reply = s.post_form(&admin, "/alerts/rules", &fields).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        assert!(reply.body.contains(why), "{}", reply.body);
    }
    assert_eq!(s.db.alert_rules().await.unwrap().len(), rules.len());

    // Edit, then delete.
    let edit = s.page(&format!("/alerts/rules/{}", rule.id), &admin).await;
    assert_eq!(edit.status, StatusCode::OK);
    assert!(edit.body.contains("value=\"lab-*\""));
    let saved = s
        .post_form(
            &admin,
            &format!("/alerts/rules/{}", rule.id),
            &[
                ("name", "Busy lab guests"),
                ("kind", "guest_waste"),
                ("scope", "hypervisor"),
                ("scope_value", "qemu"),
                ("threshold", "7.5"),
                ("minutes", "10"),
                ("severity", "warning"),
                ("csrf", csrf),
            ],
        )
        .await;
    assert!(
        done(&s, &admin, saved)
            .await
            .contains("Rule Busy lab guests saved.")
    );
    let changed =
        s.db.alert_rules()
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.id == rule.id)
            .unwrap();
    assert_eq!(
        (
            changed.settings.threshold,
            changed.settings.duration_s,
            changed.settings.enabled
        ),
        (7.5, 600, false)
    );
    let deleted = s
        .post_form(
            &admin,
            &format!("/alerts/rules/{}/delete", rule.id),
            &[("csrf", csrf)],
        )
        .await;
    assert!(done(&s, &admin, deleted).await.contains("deleted"));
    assert_eq!(s.db.alert_rules().await.unwrap().len(), rules.len() - 1);

    // A silence, then ended early.
    let silenced = s
        .post_form(
            &admin,
            "/alerts/silences",
            &[
                ("rule_id", ""),
                ("pattern", "ticker-*"),
                ("hours", "4"),
                ("reason", "upgrade on Friday"),
                ("csrf", csrf),
            ],
        )
        .await;
    let page = done(&s, &admin, silenced).await;
    assert!(page.contains("Silenced until"));
    assert_eq!(
        page.matches("<span class=\"badge\">silenced</span>")
            .count(),
        2,
        "both tickers"
    );
    let id =
        s.db.silences(tickscope_server::clock::now_ms())
            .await
            .unwrap()
            .into_iter()
            .find(|x| x.pattern == "ticker-*")
            .unwrap()
            .id;
    let ended = s
        .post_form(
            &admin,
            &format!("/alerts/silences/{id}/expire"),
            &[("csrf", csrf)],
        )
        .await;
    assert!(done(&s, &admin, ended).await.contains("Silence ended."));
    let bad = s
        .post_form(
            &admin,
            "/alerts/silences",
            &[("hours", "0"), ("reason", "x"), ("csrf", csrf)],
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Receivers: an address must be http(s).
    let refused = s
        .post_form(
            &admin,
            "/alerts/receivers",
            &[
                ("name", "x"),
                ("url", "javascript:alert(1)"),
                ("format", "json"),
                ("csrf", csrf),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    // ... nor one of the server's own or its link's (the cloud metadata service), unless an
    // admin allows its network.
    for url in [
        "http://127.0.0.1:9093/",
        "http://localhost:9093/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
    ] {
        let refused = s
            .post_form(
                &admin,
                "/alerts/receivers",
                &[
                    ("name", "inside"),
                    ("url", url),
                    ("format", "json"),
                    ("csrf", csrf),
                ],
            )
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        assert!(
            refused.body.contains("--allow-receiver-networks"),
            "{url}: {}",
            refused.body
        );
    }
    let added = s
        .post_form(
            &admin,
            "/alerts/receivers",
            &[
                ("name", "pager"),
                ("url", "https://pager.example/hook"),
                ("format", "alertmanager"),
                ("csrf", csrf),
            ],
        )
        .await;
    assert!(
        done(&s, &admin, added)
            .await
            .contains("https://pager.example/hook")
    );
    let twice = s
        .post_form(
            &admin,
            "/alerts/receivers",
            &[
                ("name", "pager"),
                ("url", "https://pager.example/hook"),
                ("format", "alertmanager"),
                ("csrf", csrf),
            ],
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);

    // Acknowledge a firing alert.
    let alert =
        s.db.open_alerts()
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.state == "firing")
            .unwrap();
    let acked = s
        .post_form(
            &admin,
            &format!("/alerts/{}/ack", alert.id),
            &[("csrf", csrf)],
        )
        .await;
    let page = done(&s, &admin, acked).await;
    assert!(page.contains("Alert acknowledged."));
    assert!(page.contains("ada, 0 s ago"), "{page}");
}

#[tokio::test]
async fn a_receivers_auth_header_is_stored_but_never_shown_and_its_grouping_is_edited() {
    let s = furnished().await;
    let admin = s.login("ada", "admin").await;
    let csrf = admin.csrf.as_str();
    const SECRET: &str = "Bearer s3cret-token-value";
    let added = s
        .post_form(
            &admin,
            "/alerts/receivers",
            &[
                ("name", "pager"),
                ("url", "https://pager.example/hook"),
                ("format", "alertmanager"),
                ("group_by", "host, hypervisor"),
                ("group_wait_s", "10"),
                ("group_interval_s", "120"),
                ("auth_header", SECRET),
                ("csrf", csrf),
            ],
        )
        .await;
    let page = done(&s, &admin, added).await;
    assert!(!page.contains("s3cret"), "the auth header is shown back");
    assert!(page.contains("alertname, host, hypervisor"), "{page}");
    let stored = |name: &'static str| {
        let db = s.db.clone();
        async move {
            db.receivers()
                .await
                .unwrap()
                .into_iter()
                .find(|r| r.settings.name == name)
                .unwrap()
        }
    };
    let pager = stored("pager").await;
    assert_eq!(pager.settings.auth_header.as_deref(), Some(SECRET));
    assert_eq!(
        (pager.settings.group_wait_s, pager.settings.group_interval_s),
        (10, 120)
    );

    // Edited without a new header: the stored one stays.
    let saved = s
        .post_form(
            &admin,
            &format!("/alerts/receivers/{}", pager.id),
            &[
                ("name", "pager"),
                ("url", "https://pager.example/hook"),
                ("format", "alertmanager"),
                ("group_by", ""),
                ("group_wait_s", "30"),
                ("group_interval_s", "300"),
                ("csrf", csrf),
            ],
        )
        .await;
    assert!(
        done(&s, &admin, saved)
            .await
            .contains("Receiver pager saved.")
    );
    let pager = stored("pager").await;
    assert_eq!(pager.settings.auth_header.as_deref(), Some(SECRET));
    assert_eq!(
        (
            pager.settings.group_by.as_str(),
            pager.settings.group_wait_s,
            pager.settings.group_interval_s
        ),
        ("", 30, 300)
    );
    // Removed when asked; a group label that is no label name is refused.
    let cleared = s
        .post_form(
            &admin,
            &format!("/alerts/receivers/{}", pager.id),
            &[
                ("name", "pager"),
                ("url", "https://pager.example/hook"),
                ("format", "alertmanager"),
                ("clear_auth", "on"),
                ("csrf", csrf),
            ],
        )
        .await;
    done(&s, &admin, cleared).await;
    assert_eq!(stored("pager").await.settings.auth_header, None);
    // Each refused with 422, nothing changed: a group label that is no label name, a CA that
    // is no certificate, a header value HTTP cannot carry.
    for (field, value) in [
        ("group_by", "host-name"),
        ("ca_pem", "not a certificate"),
        ("auth_header", "Bearer caf\u{e9}"),
    ] {
        let refused = s
            .post_form(
                &admin,
                &format!("/alerts/receivers/{}", pager.id),
                &[
                    ("name", "pager"),
                    ("url", "https://pager.example/hook"),
                    ("format", "alertmanager"),
                    (field, value),
                    ("csrf", csrf),
                ],
            )
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}");
    }
    assert_eq!(stored("pager").await.settings.auth_header, None);
}

#[tokio::test]
async fn hostile_names_render_as_text_on_the_alert_pages() {
    let s = server().await;
    let mut report = fleet_report(1);
    report["guests"][1]["name"] = serde_json::json!("<img src=x onerror=alert(1)>");
    report["host"]["name"] = serde_json::json!("hv\"><script>alert(2)</script>");
    s.post_report(Some(&s.agent_token), &report).await;
    common::set_guest_rule(&s.db, 0, true).await;
    alerts::evaluate(&s.state, tickscope_server::clock::now_ms())
        .await
        .unwrap();
    let login = s.login("alice", "viewer").await;
    let id =
        s.db.open_alerts()
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.subject_name.starts_with("<img"))
            .unwrap()
            .subject_id;
    for path in [
        "/alerts".to_string(),
        "/".to_string(),
        format!("/guests/{id}"),
    ] {
        let page = s.page(&path, &login).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(!page.body.contains("<img src=x"), "{path}: raw VM name");
        assert!(
            !page.body.contains("<script>alert(2)"),
            "{path}: raw host name"
        );
        assert!(
            page.body.contains("onerror=alert(1)"),
            "{path}: the name is shown, escaped"
        );
    }
}
