//! Exports: the ranked guests and the upgrade plan, as a spreadsheet or a script would read them.

mod common;

use axum::http::{Method, StatusCode};
use serde_json::json;

use common::{fleet_report, server};

#[tokio::test]
async fn the_guest_csv_parses_back_to_the_ranking_and_defuses_formulas() {
    let s = server().await;
    let mut r = fleet_report(1);
    r["guests"][1]["name"] = json!("=HYPERLINK(\"http://evil.example\",\"click\")");
    s.post_report(Some(&s.agent_token), &r).await;
    let ranking = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let reply = s
        .call(
            Method::GET,
            "/api/v1/guests.csv",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type.starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(reply.body.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(header, tickscope_server::export::GUEST_COLUMNS);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3);
    for (row, guest) in rows.iter().zip(ranking["guests"].as_array().unwrap()) {
        let name = guest["name"].as_str().unwrap();
        let expected = if name.starts_with('=') {
            format!("'{name}")
        } else {
            name.to_string()
        };
        assert_eq!(&row[1], expected);
        assert_eq!(&row[8], guest["tick_mode"].as_str().unwrap());
        let waste: f64 = row[11].parse().unwrap();
        assert!((waste - guest["wasted_cpu_pct"].as_f64().unwrap()).abs() < 1e-3);
    }
    assert!(
        rows.iter().all(|r| !r[1].starts_with('=')),
        "a formula reached the CSV"
    );
}

#[tokio::test]
async fn the_plan_groups_guests_and_is_readable_as_json_csv_and_a_page() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let plan = s
        .call(Method::GET, "/api/v1/plan", Some(&s.viewer_token), None)
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    let groups = plan.json()["groups"].as_array().unwrap().clone();
    // Without guest facts: one group of two periodic guests, one of the tickless guest.
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert_eq!(groups[0]["tick_mode"], "periodic");
    assert_eq!(groups[0]["guests"], 2);
    assert_eq!(groups[0]["change"], "Remove `nohz=off`");
    assert!((groups[0]["projected_saving_cpu_pct"].as_f64().unwrap() - 12.4).abs() < 1e-9);
    assert_eq!(groups[1]["change"], "");

    let csv = s
        .call(Method::GET, "/api/v1/plan.csv", Some(&s.viewer_token), None)
        .await;
    let mut reader = csv::Reader::from_reader(csv.body.as_bytes());
    assert_eq!(reader.records().count(), 2);

    let page = s.page("/plan", &s.login("alice", "viewer").await).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Kernel-upgrade plan"));
    assert!(page.body.contains("at 7 W per busy core"));

    for path in ["/api/v1/plan", "/api/v1/plan.csv", "/api/v1/guests.csv"] {
        let denied = s.call(Method::GET, path, Some(&s.agent_token), None).await;
        assert_eq!(denied.status, StatusCode::FORBIDDEN, "{path}");
    }
}
