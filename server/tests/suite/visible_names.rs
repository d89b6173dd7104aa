//! Names with bidi controls (U+202E turns `gpj.exe` around) or zero-width characters (U+200B makes
//! two guests look alike) are shown as escapes in pages, CSV exports and `/metrics`, while the API
//! gives them back as stored.

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::json;

use common::{Server, fleet_report, server};

/// The guest's name as its agent sends it: reversed after U+202E, split by an invisible space.
const TRICKY_GUEST: &str = "web\u{200b}-01\u{202e}gpj.exe";
const SHOWN_GUEST: &str = r"web\u{200b}-01\u{202e}gpj.exe";
const TRICKY_HOST: &str = "hv\u{202e}1";
const SHOWN_HOST: &str = r"hv\u{202e}1";

fn hidden(text: &str) -> bool {
    text.contains('\u{202e}') || text.contains('\u{200b}')
}

async fn seeded() -> Server {
    let s = server().await;
    let mut report = fleet_report(1);
    report["guests"][1]["name"] = json!(TRICKY_GUEST);
    report["host"]["name"] = json!(TRICKY_HOST);
    let reply = s.post_report(Some(&s.agent_token), &report).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // Stored as sent.
    let api = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let names: Vec<&str> = api["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&TRICKY_GUEST), "{names:?}");
    s
}

#[tokio::test]
async fn pages_show_bidi_and_zero_width_characters_as_escapes() {
    let s = seeded().await;
    let login = s.login("alice", "admin").await;
    let list = s.page("/guests", &login).await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(!hidden(&list.body), "a page holds a hidden character");
    assert!(list.body.contains(SHOWN_GUEST), "{}", list.body);
    assert!(list.body.contains(SHOWN_HOST), "{}", list.body);
    for path in ["/", "/hosts", "/plan"] {
        let page = s.page(path, &login).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(!hidden(&page.body), "{path} holds a hidden character");
    }
}

#[tokio::test]
async fn csv_cells_show_bidi_and_zero_width_characters_as_escapes() {
    let s = seeded().await;
    let reply = s
        .call(
            Method::GET,
            "/api/v1/guests.csv",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!hidden(&reply.body), "the CSV holds a hidden character");
    let mut reader = csv::Reader::from_reader(reply.body.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert!(rows.iter().any(|r| &r[1] == SHOWN_GUEST), "{}", reply.body);
    assert!(rows.iter().all(|r| &r[3] == SHOWN_HOST), "{}", reply.body);
}

#[tokio::test]
async fn metrics_labels_show_bidi_and_zero_width_characters_as_escapes() {
    let s = seeded().await;
    let reply = s
        .call(Method::GET, "/metrics", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(!hidden(&reply.body), "/metrics holds a hidden character");
    // The exposition escapes the backslash of each escape (`\\u{202e}`). prometheus-parse cannot
    // read a label value with `}` in it, so the lines are read as text.
    let exposed = |text: &str| text.replace('\\', r"\\");
    let vcpus: Vec<&str> = reply
        .body
        .lines()
        .filter(|l| l.starts_with("tickscope_guest_vcpus{"))
        .collect();
    assert_eq!(vcpus.len(), 3, "{}", reply.body);
    let guest = format!("guest=\"{}\"", exposed(SHOWN_GUEST));
    assert!(vcpus.iter().any(|l| l.contains(&guest)), "{vcpus:#?}");
    let host = format!("host=\"{}\"", exposed(SHOWN_HOST));
    assert!(vcpus.iter().all(|l| l.contains(&host)), "{vcpus:#?}");
}
