//! Random and mutated reports against the ingest edge (property tests): whatever an agent or an
//! attacker sends, the server answers it without a 5xx or a panic, and a refused report changes
//! nothing in the database.

use crate::common;

use proptest::prelude::*;
use serde_json::{Value, json};

use common::{fleet_report, server};

/// Every place a value sits in `v`, as a path of keys and indices.
fn leaf_paths(v: &Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(map) => {
            out.push(at.clone());
            for (k, child) in map {
                let mut p = at.clone();
                p.push(k.clone());
                leaf_paths(child, p, out);
            }
        }
        Value::Array(items) => {
            out.push(at.clone());
            for (i, child) in items.iter().enumerate() {
                let mut p = at.clone();
                p.push(i.to_string());
                leaf_paths(child, p, out);
            }
        }
        _ => out.push(at),
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, key| match v {
        Value::Object(map) => map.get_mut(key).unwrap(),
        Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
        _ => unreachable!(),
    })
}

/// Values that break assumptions: signs, sizes, types, text no VM should have.
fn nasty() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e308)),
        Just(json!(-1e-308)),
        Just(json!(0.5)),
        Just(json!(true)),
        Just(json!([])),
        Just(json!({})),
        Just(json!("")),
        Just(json!("x".repeat(5000))),
        Just(json!("\u{0}\u{7}\u{1b}[31m")),
        Just(json!("<script>alert(1)</script>")),
        Just(json!("\u{202e}lamron")),
        Just(json!("1e999")),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,40}".prop_map(|s| json!(s)),
    ]
}

/// A valid report with up to three of its values replaced, keys removed or keys added.
fn mutated() -> impl Strategy<Value = Value> {
    let mut paths = Vec::new();
    leaf_paths(&fleet_report(1), Vec::new(), &mut paths);
    let n = paths.len();
    prop::collection::vec((0..n, 0..3u8, nasty(), "[a-z_]{1,12}"), 1..=3).prop_map(move |edits| {
        let mut report = fleet_report(1);
        for (i, how, value, key) in edits {
            let path = &paths[i];
            // An edit may have removed what a later one points at: skip it then.
            let exists = path.iter().try_fold(&report, |v, k| match v {
                Value::Object(m) => m.get(k),
                Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            });
            if exists.is_none() {
                continue;
            }
            match (how, path.split_last()) {
                (0, _) | (_, None) => *at_mut(&mut report, path) = value,
                (1, Some((last, parent))) => {
                    if let Value::Object(m) = at_mut(&mut report, parent) {
                        m.remove(last);
                    }
                }
                (_, Some(_)) => {
                    if let Value::Object(m) = at_mut(&mut report, path) {
                        m.insert(key, value);
                    }
                }
            }
        }
        report
    })
}

/// Cases per property: 300 on SQLite, where the inputs' shapes are explored; 100 on
/// PostgreSQL, where each case's fresh server costs about five times as much (each of its
/// connections logs in with SCRAM-SHA-256, thousands of unoptimised hash rounds in a test
/// build) and what is checked there is that this store, too, keeps a refusal traceless.
fn cases() -> u32 {
    match common::database::backend() {
        tickscope_server::db::BackendKind::Sqlite => 300,
        tickscope_server::db::BackendKind::Postgres => 100,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Failures are printed with their input; no regression file is written into the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_mutated_report_is_stored_whole_or_refused_without_a_trace(report in mutated()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let s = server().await;
            let before = s.stored().await;
            let reply = s.post_report(Some(&s.agent_token), &report).await;
            prop_assert!(reply.status.as_u16() < 500, "{} for {report}: {}", reply.status, reply.body);
            let after = s.stored().await;
            if reply.status.is_success() {
                prop_assert_eq!(after.0, before.0 + 1);
            } else {
                prop_assert_eq!(after, before, "refused with {} but stored: {}", reply.status, reply.body);
                // A refusal says what was wrong, as JSON.
                let body: Value = serde_json::from_str(&reply.body).unwrap();
                prop_assert!(body["error"]["message"].is_string(), "{}", reply.body);
            }
            Ok(())
        })?;
    }

    #[test]
    fn arbitrary_bytes_never_cause_a_server_error(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let s = server().await;
            let reply = s
                .call_raw(axum::http::Method::POST, "/api/v1/reports", Some(&s.agent_token), body)
                .await;
            prop_assert!(reply.status.as_u16() < 500 && !reply.status.is_success(), "{}: {}", reply.status, reply.body);
            prop_assert_eq!(s.stored().await, (0, 0));
            Ok(())
        })?;
    }
}
