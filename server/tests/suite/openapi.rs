//! `GET /api/v1/openapi.json`: served to anyone, and true to the routes it describes. What the
//! endpoints answer is checked against it by schemathesis (`scripts/schemathesis.sh`).

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::Value;

use common::server;
use tickscope_wire::{GUEST_FACTS_PATH, REPORTS_PATH};

async fn document(s: &common::Server) -> Value {
    let reply = s
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type, "application/json");
    reply.json()
}

/// Each documented operation, as (method, path with `{id}` filled in).
fn operations(doc: &Value) -> Vec<(Method, String)> {
    let mut ops = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            ops.push((method, path.replace("{id}", "1")));
        }
    }
    ops
}

#[tokio::test]
async fn the_document_describes_every_json_endpoint_and_each_exists() {
    let s = server().await;
    let doc = document(&s).await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let ops = operations(&doc);
    for expected in [
        (Method::POST, REPORTS_PATH),
        (Method::POST, GUEST_FACTS_PATH),
        (Method::GET, "/api/v1/guests"),
        (Method::GET, "/api/v1/guests/1"),
        (Method::GET, "/api/v1/hosts"),
        (Method::GET, "/api/v1/plan"),
        (Method::GET, "/api/v1/alerts"),
        (Method::GET, "/api/v1/guests.csv"),
        (Method::GET, "/api/v1/plan.csv"),
    ] {
        assert!(
            ops.contains(&(expected.0.clone(), expected.1.to_string())),
            "{expected:?} is not documented"
        );
    }
    // Each documented route is served and wants a token: a route that does not exist would be
    // 404 or 405.
    for (method, path) in ops {
        let body = (method == Method::POST).then(|| "{}".to_string());
        let reply = s.call(method.clone(), &path, None, body).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(reply.json()["error"]["code"], "unauthorized");
    }
}

#[tokio::test]
async fn every_operation_documents_its_errors_with_the_error_body() {
    let s = server().await;
    let doc = document(&s).await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            for status in ["200", "401", "403", "408", "500"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} does not document {status}"
                );
            }
            for (status, response) in responses {
                if status.starts_with('2') || status == "408" {
                    continue;
                }
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(
                    schema, "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
            assert_eq!(op["security"][0]["token"], serde_json::json!([]));
        }
    }
}

/// Client generators name a function after each operationId: a repeated or missing one gives
/// clashing or unnamed functions.
#[tokio::test]
async fn every_operation_has_its_own_operation_id() {
    let s = server().await;
    let doc = document(&s).await;
    let mut seen = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{method} {path}: {id:?} is not a plain identifier"
            );
            if let Some(other) = seen.insert(id.to_string(), format!("{method} {path}")) {
                panic!("{id:?} names both {other} and {method} {path}");
            }
        }
    }
    assert!(seen.len() >= 9, "{seen:?}");
}

#[tokio::test]
async fn a_refused_report_answers_the_documented_error_body() {
    let s = server().await;
    let doc = document(&s).await;
    let detail = &doc["components"]["schemas"]["ErrorDetail"];
    let mut report = common::fleet_report(0);
    report["host"]["cpus"] = serde_json::json!(0);
    let reply = s.post_report(Some(&s.agent_token), &report).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let error = reply.json()["error"].clone();
    // Exactly the documented fields, the required ones present.
    let documented: Vec<&String> = detail["properties"].as_object().unwrap().keys().collect();
    for key in error.as_object().unwrap().keys() {
        assert!(documented.contains(&key), "{key} is not documented");
    }
    for required in detail["required"].as_array().unwrap() {
        assert!(error.get(required.as_str().unwrap()).is_some());
    }
    assert_eq!(error["field"], "host.cpus");
}
