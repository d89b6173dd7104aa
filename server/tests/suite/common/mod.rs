//! Helpers shared by the HTTP tests: a server on a test's own database (SQLite, or PostgreSQL
//! when the suite runs on it: `database.rs`), called in-process.
#![allow(dead_code)]

pub mod ansible;
pub mod database;
pub mod processes;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use tickscope_server::auth;
use tickscope_server::clock::{ManualClock, SharedClock, SystemClock};
use tickscope_server::db::Db;
use tickscope_server::state::{AppState, Options};
use tickscope_server::{app, clock};

pub struct Server {
    pub dir: tempfile::TempDir,
    /// Where `db` is, for a test that reaches under the server (`database::RawDb`).
    pub test_db: database::TestDb,
    pub db: Db,
    pub state: AppState,
    pub router: Router,
    pub agent_token: String,
    pub viewer_token: String,
}

pub async fn server() -> Server {
    server_with(Options::default()).await
}

/// A server with other options (a fast notification retry, say).
pub async fn server_with(options: Options) -> Server {
    server_with_clock(options, Arc::new(SystemClock)).await
}

/// A clock for [`server_with_clock`] that stands still until the test moves it, starting at the
/// wall clock's now (what [`report`] dates its reports by).
pub fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(clock::now_ms()))
}

/// A server that reads the time from `clock`: a test steps a [`ManualClock`] past a wait (a
/// webhook group's, a login throttle's, a cache's) instead of sleeping through it.
pub async fn server_with_clock(options: Options, clock: SharedClock) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let test_db = database::TestDb::new(dir.path(), "t.db").await;
    let db = test_db.open().await;
    let mut tokens = vec![];
    for role in ["agent", "viewer"] {
        let token = auth::new_token().unwrap();
        db.insert_token(
            role,
            tickscope_server::domain::TokenRole::parse(role).unwrap(),
            &auth::token_hash(&token),
            None,
            clock.now_ms(),
        )
        .await
        .unwrap();
        tokens.push(token);
    }
    let state = AppState::with_clock(db.clone(), options, clock)
        .await
        .unwrap();
    Server {
        dir,
        test_db,
        db,
        router: app::router(state.clone()),
        state,
        viewer_token: tokens.pop().unwrap(),
        agent_token: tokens.pop().unwrap(),
    }
}

pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub body: String,
    /// `Location`, for redirects.
    pub location: String,
    /// `Vary`, for answers that depend on a request header.
    pub vary: String,
    /// The session cookie the reply set (`tickscope_session=...`), if it set one.
    pub session_cookie: Option<String>,
    /// That cookie's whole `Set-Cookie` header, flags included.
    pub set_cookie: String,
    /// The login form's CSRF cookie (`tickscope_login=...`), if the reply set it.
    pub login_cookie: Option<String>,
}

/// A browser's session: its cookie, and the CSRF token its pages' forms carry.
#[derive(Debug, Clone)]
pub struct Login {
    pub cookie: String,
    pub csrf: String,
}

/// The CSRF token in a page's forms.
pub fn csrf_in(html: &str) -> Option<String> {
    let at = html.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    Some(
        html[at..]
            .chars()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect(),
    )
}

/// A form body, URL-encoded.
pub fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            let enc = |s: &str| {
                s.bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                            (b as char).to_string()
                        }
                        _ => format!("%{b:02X}"),
                    })
                    .collect::<String>()
            };
            format!("{}={}", enc(k), enc(v))
        })
        .collect::<Vec<_>>()
        .join("&")
}

pub const PASSWORD: &str = "a long enough password";

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
        self.send(request.body(Body::from(body.unwrap_or_default())).unwrap())
            .await
    }

    /// A request with a body of raw bytes, sent as JSON.
    pub async fn call_raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// A POST with a bearer token and a body sent as `content_type` (none: no Content-Type).
    pub async fn post_as(
        &self,
        path: &str,
        token: &str,
        content_type: Option<&str>,
        body: String,
    ) -> Reply {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"));
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// A browser's request: with the session cookie, and a form body for a POST.
    pub async fn browse(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        form_body: Option<String>,
    ) -> Reply {
        self.browse_with(method, path, cookie, form_body, &[]).await
    }

    /// [`Server::browse`] with more headers (`Origin`, `Sec-Fetch-Site`, `Host`).
    pub async fn browse_with(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        form_body: Option<String>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        if form_body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        self.send(
            request
                .body(Body::from(form_body.unwrap_or_default()))
                .unwrap(),
        )
        .await
    }

    /// POST a form as a logged-in user.
    pub async fn post_form(&self, login: &Login, path: &str, fields: &[(&str, &str)]) -> Reply {
        self.browse(Method::POST, path, Some(&login.cookie), Some(form(fields)))
            .await
    }

    /// GET a page as a logged-in user.
    pub async fn page(&self, path: &str, login: &Login) -> Reply {
        self.browse(Method::GET, path, Some(&login.cookie), None)
            .await
    }

    /// Adds the user unless there is one of that name, and logs in through the login form, as a
    /// browser would.
    pub async fn login(&self, name: &str, role: &str) -> Login {
        if self.db.user_by_name(name).await.unwrap().is_none() {
            let hash = auth::hash_password(PASSWORD).unwrap();
            self.db
                .insert_user(
                    name,
                    tickscope_server::domain::UserRole::parse(role).unwrap(),
                    &hash,
                    self.state.clock.now_ms(),
                )
                .await
                .unwrap();
        }
        let reply = self.submit_login(name, PASSWORD).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
        let cookie = reply
            .session_cookie
            .expect("logging in sets a new session cookie");
        let home = self.browse(Method::GET, "/", Some(&cookie), None).await;
        assert_eq!(home.status, StatusCode::OK, "{}", home.body);
        let csrf = csrf_in(&home.body).expect("pages carry the logout form's CSRF token");
        Login { cookie, csrf }
    }

    /// Fills in and sends the login form as a browser would; the reply to the POST.
    pub async fn submit_login(&self, name: &str, password: &str) -> Reply {
        let page = self.browse(Method::GET, "/login", None, None).await;
        let cookie = page
            .login_cookie
            .clone()
            .expect("the login page sets its CSRF cookie");
        let csrf = csrf_in(&page.body).expect("the login form carries a CSRF token");
        let body = form(&[("name", name), ("password", password), ("csrf", &csrf)]);
        self.browse(Method::POST, "/login", Some(&cookie), Some(body))
            .await
    }

    /// Sends `request` through the server's router as it is.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let header_text = |name| {
            response
                .headers()
                .get(name)
                .map(|v: &header::HeaderValue| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        let content_type = header_text(header::CONTENT_TYPE);
        let location = header_text(header::LOCATION);
        let vary = header_text(header::VARY);
        let set_cookie = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("tickscope_session="))
            .unwrap_or_default()
            .to_string();
        let session_cookie =
            (!set_cookie.is_empty()).then(|| set_cookie.split(';').next().unwrap().to_string());
        let login_cookie = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("tickscope_login="))
            .map(|v| v.split(';').next().unwrap().to_string());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
            location,
            vary,
            session_cookie,
            set_cookie,
            login_cookie,
        }
    }

    /// The headers of a page's response, as a logged-in browser gets it.
    pub async fn page_with_headers(&self, path: &str, login: &Login) -> axum::http::HeaderMap {
        let request = Request::builder()
            .uri(path)
            .header(header::COOKIE, &login.cookie)
            .body(Body::empty())
            .unwrap();
        self.router
            .clone()
            .oneshot(request)
            .await
            .unwrap()
            .headers()
            .clone()
    }

    /// The headers of a response to a request with an optional bearer token.
    pub async fn headers_of(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
    ) -> axum::http::HeaderMap {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Body::empty()).unwrap();
        self.router
            .clone()
            .oneshot(request)
            .await
            .unwrap()
            .headers()
            .clone()
    }

    /// The headers of the response to a JSON POST.
    pub async fn headers_of_post(
        &self,
        path: &str,
        token: Option<&str>,
        body: String,
    ) -> axum::http::HeaderMap {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Body::from(body)).unwrap();
        self.router
            .clone()
            .oneshot(request)
            .await
            .unwrap()
            .headers()
            .clone()
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
    let end = clock::now_ms() - 1000;
    json!({
        "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
        "seq": seq,
        "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0-57-cloud-amd64"},
        "interval": {"start_ms": end - 10_000, "end_ms": end, "length_ns": 10_000_000_000u64},
        "guests": guests
    })
}

pub fn fleet_report(seq: u64) -> Value {
    // The quiet guest's agent also says what its VM's command line shows and where its CPU
    // went among its threads, as an agent on a Linux libvirt domain does.
    let mut quiet = guest("quiet", 1, 0.3, 38.0, None);
    quiet["vm_config"] = json!({"hyperv": [], "hpet": true});
    quiet["cpu_parts"] = json!({
        "vcpus_s": 0.024, "iothreads_s": 0.002, "vhost_s": 0.0, "emulator_s": 0.004
    });
    quiet["halt_poll_seconds"] = json!(0.001);
    report(
        seq,
        vec![
            quiet,
            guest("ticker-1", 1, 5.3, 650.0, Some("console=ttyS0 nohz=off")),
            guest("ticker-2", 2, 8.6, 572.0, Some("console=ttyS0 nohz=off")),
        ],
    )
}

/// The guest rule a new database comes with (the first rule), made to fire after `duration_s`,
/// enabled or not.
pub async fn set_guest_rule(db: &Db, duration_s: i64, enabled: bool) {
    set_guest_rule_with_threshold(db, duration_s, enabled, None).await;
}

/// As `set_guest_rule`, and with `threshold_pct` (wasted % of a core) in place of the default's
/// 2 % when given.
pub async fn set_guest_rule_with_threshold(
    db: &Db,
    duration_s: i64,
    enabled: bool,
    threshold_pct: Option<f64>,
) {
    let rule = db.alert_rules().await.unwrap().remove(0);
    assert_eq!(rule.settings.kind, "guest_waste");
    let id = rule.id;
    let mut new = rule.settings;
    new.duration_s = duration_s;
    new.enabled = enabled;
    if let Some(threshold) = threshold_pct {
        new.threshold = threshold;
    }
    db.save_alert_rule(Some(id), &new, "test", 0).await.unwrap();
}

/// A certificate for 127.0.0.1, signed by a private CA made for the test (rcgen), written to
/// `cert.pem` and `key.pem` in `dir`.
pub struct LoopbackCertificate {
    pub cert_path: std::path::PathBuf,
    pub key_path: std::path::PathBuf,
    /// The CA a client must trust to reach it.
    pub ca: rcgen::Certificate,
}

pub fn loopback_certificate(dir: &std::path::Path) -> LoopbackCertificate {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    LoopbackCertificate {
        cert_path,
        key_path,
        ca,
    }
}

/// Posts each of `forms` (path, fields) as `login` without a CSRF token, with a made-up one and
/// with `other`'s (another session's): every one must be refused with 403.
pub async fn assert_forms_need_this_sessions_csrf(
    s: &Server,
    login: &Login,
    other: &Login,
    forms: &[(&str, &[(&str, &str)])],
) {
    for (path, fields) in forms {
        for csrf in [None, Some("0000"), Some(other.csrf.as_str())] {
            let mut fields = fields.to_vec();
            if let Some(csrf) = csrf {
                fields.push(("csrf", csrf));
            }
            let reply = s.post_form(login, path, &fields).await;
            assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path} with {csrf:?}");
        }
    }
}

/// Copies the directory tree `from` into `to` (a recorded `/proc` into a temporary one).
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
