//! The guest list in pages: every guest the filters keep is on exactly one page, reached by
//! following the "next" links, which keep the filters and the sort; VM names stay escaped on
//! every page. Run: `cargo test -p tickscope-server --test suite guest_list_pages::`.

use std::collections::BTreeMap;

use axum::http::StatusCode;

use crate::common::{self, server};

/// The address in the page's `rel="next"` link, unescaped, if there is one.
fn next_link(body: &str) -> Option<String> {
    let at = body.find("<a rel=\"next\" href=\"")? + "<a rel=\"next\" href=\"".len();
    let end = at + body[at..].find('"')?;
    Some(body[at..end].replace("&amp;", "&").replace("&#38;", "&"))
}

/// The guest ids a list page links to, in its order.
fn listed_ids(body: &str) -> Vec<i64> {
    body.split("<td><a href=\"/guests/")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
        .collect()
}

#[tokio::test]
async fn next_links_reach_every_kept_guest_exactly_once_with_the_filters_kept() {
    let s = server().await;
    // 130 periodic guests (a third with a hostile name, many with equal waste, so that ties
    // decide where pages cut) and 40 tickless ones the filter leaves out.
    let mut guests = Vec::new();
    for i in 0..130 {
        let name = if i % 3 == 0 {
            format!("<img src=x onerror=alert({i})>")
        } else {
            format!("ticker-{i:03}")
        };
        let cpu = [5.3, 8.6, 5.3, 12.0][i % 4];
        guests.push(common::guest(&name, 1, cpu, 650.0, Some("nohz=off")));
    }
    for i in 0..40 {
        guests.push(common::guest(&format!("quiet-{i:03}"), 1, 0.3, 38.0, None));
    }
    // A host with the cores to run them all.
    let mut report = common::report(1, guests);
    report["host"]["cpus"] = serde_json::json!(64);
    let reply = s.post_report(Some(&s.agent_token), &report).await;
    assert!(reply.status.is_success(), "{}", reply.body);
    let login = s.login("alice", "viewer").await;

    let first = "/guests?mode=periodic&sort=waste";
    let mut path = first.to_string();
    let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
    let mut pages = 0;
    let mut escaped = 0;
    loop {
        let page = s.page(&path, &login).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(page.body.contains("130 of 170 active guest(s)"), "{path}");
        assert!(!page.body.contains("<img src=x"), "raw VM name on {path}");
        escaped += page.body.matches("&lt;img src=x onerror=alert(").count()
            + page.body.matches("&#60;img src=x onerror=alert(").count();
        // The filter stays chosen on every page.
        assert!(
            page.body.contains(r#"<option value="periodic" selected>"#),
            "{path}"
        );
        let ids = listed_ids(&page.body);
        assert!(
            !ids.is_empty() && ids.len() <= 50,
            "{path}: {} rows",
            ids.len()
        );
        for id in ids {
            *seen.entry(id).or_default() += 1;
        }
        pages += 1;
        match next_link(&page.body) {
            Some(next) => {
                assert!(
                    next.contains("mode=periodic") && next.contains("sort=waste"),
                    "{next} dropped the view"
                );
                path = next;
            }
            None => break,
        }
        assert!(pages < 10, "the next links do not end");
    }
    assert_eq!(pages, 3);
    // Each hostile name was listed once, escaped.
    assert_eq!(escaped, 44);
    assert!(seen.values().all(|&n| n == 1), "listed twice: {seen:?}");
    // Exactly the periodic guests: the ones the ranking calls periodic, none of the quiet ones.
    let ranked = s.state.fleet.ranked(s.state.clock.now_ms()).await;
    let mut periodic: Vec<i64> = ranked
        .iter()
        .filter(|g| g.verdict.classification.mode.as_str() == "periodic")
        .map(|g| g.id.0)
        .collect();
    periodic.sort_unstable();
    assert_eq!(periodic.len(), 130);
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), periodic);
}
