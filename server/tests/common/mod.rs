//! Helpers shared by the HTTP tests: a server on a temporary SQLite file, called in-process.
#![allow(dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use tickscope_server::app::{self, AppState, Options};
use tickscope_server::auth;
use tickscope_server::db::Db;

pub struct Server {
    pub dir: tempfile::TempDir,
    pub db: Db,
    pub router: Router,
    pub agent_token: String,
    pub viewer_token: String,
}

pub async fn server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("t.db")).await.unwrap();
    let mut tokens = vec![];
    for role in ["agent", "viewer"] {
        let token = auth::new_token().unwrap();
        db.insert_token(role, role, &auth::token_hash(&token), None, app::now_ms())
            .await
            .unwrap();
        tokens.push(token);
    }
    let state = AppState {
        db: db.clone(),
        options: Arc::new(Options::default()),
    };
    Server {
        dir,
        db,
        router: app::router(state),
        viewer_token: tokens.pop().unwrap(),
        agent_token: tokens.pop().unwrap(),
    }
}

pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Server {
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(Body::from(body.unwrap_or_default())).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    pub async fn post_report(&self, token: Option<&str>, report: &Value) -> Reply {
        self.call(
            Method::POST,
            "/api/v1/reports",
            token,
            Some(report.to_string()),
        )
        .await
    }

    pub async fn stored(&self) -> (i64, i64) {
        self.db.count_reports_and_samples().await.unwrap()
    }
}

pub fn guest(
    name: &str,
    vcpus: u32,
    cpu_pct: f64,
    wakeups_per_vcpu_s: f64,
    boot_args: Option<&str>,
) -> Value {
    json!({
        "hypervisor": "qemu", "name": name, "pid": 4000 + vcpus, "vcpus": vcpus,
        "host_cpu_seconds": cpu_pct / 100.0 * 10.0,
        "vcpu_wakeups": (wakeups_per_vcpu_s * f64::from(vcpus) * 10.0) as u64,
        "wakeups_source": "vcpu_threads", "boot_args": boot_args
    })
}

pub fn report(seq: u64, guests: Vec<Value>) -> Value {
    let end = app::now_ms() - 1000;
    json!({
        "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
        "seq": seq,
        "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0-57-cloud-amd64"},
        "interval": {"start_ms": end - 10_000, "end_ms": end, "length_ns": 10_000_000_000u64},
        "guests": guests
    })
}

pub fn fleet_report(seq: u64) -> Value {
    report(
        seq,
        vec![
            guest("quiet", 1, 0.3, 38.0, None),
            guest("ticker-1", 1, 5.3, 650.0, Some("console=ttyS0 nohz=off")),
            guest("ticker-2", 2, 8.6, 572.0, Some("console=ttyS0 nohz=off")),
        ],
    )
}
