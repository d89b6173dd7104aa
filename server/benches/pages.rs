//! How fast the dashboard answers with a large fleet: run with `cargo bench -p tickscope-server`.
//!
//! Fills a fresh SQLite file with FLEET guests on hosts of BENCH_HOST_GUESTS, each with
//! BENCH_INTERVALS samples of 10 s: each host's newest report goes through the server's real
//! ingest path (validation, the transaction, the host's analysis), which makes its hosts, guests
//! and running totals; the older samples are inserted in bulk (`Db::insert_raw_samples`, the
//! statement ingest uses), since ingest itself is measured by the ingest benchmark and 100,000
//! guests through it would take many minutes. Plus one guest with BENCH_HISTORY_DAYS of history
//! (a report every 5 minutes, through ingest). A fresh server state then analyses the whole
//! fleet once, as a server that starts does. It then calls the router in-process as a
//! logged-in browser and prints the median and p95 latency of the overview, the guest list
//! (filtered and sorted, searched), a fleet guest's page (1 h charts), the history guest's page
//! (30-day charts, read from the rollups the retention made of its samples past 48 hours), the
//! hosts, the plan, the exports, and `/metrics` twice: in the classic text format (as `curl`
//! asks) and in OpenMetrics (as Prometheus asks).
//!
//! Two baselines are timed in the same run on the same file: the one SQL statement that reads
//! the 5-minute window of every active guest, and the analysis of every active guest from that
//! window, which is what each ranking page did before the fleet's current state was kept (and
//! what a server does once when it starts).
//!
//! Environment: BENCH_FLEETS (default "10000,100000"), BENCH_HOST_GUESTS (20), BENCH_INTERVALS
//! (30), BENCH_CALLS (20), BENCH_BASELINE_CALLS (3), BENCH_HISTORY_DAYS (30).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use tickscope_server::app;
use tickscope_server::auth;
use tickscope_server::db::{Db, GuestScope, RawSample};
use tickscope_server::fleet::state::FleetState;
use tickscope_server::ingest;
use tickscope_server::metrics::format::PROMETHEUS_ACCEPT;
use tickscope_server::retention::{self, Retention};
use tickscope_server::state::{AppState, Options};
use tickscope_wire::{
    AgentInfo, GuestSample, HostInfo, Hypervisor, Interval, ProcessTotals, Report, VmConfig,
    WakeupsSource,
};

const INTERVAL_MS: i64 = 10_000;
const PASSWORD: &str = "a long enough password";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A guest's host CPU in % of a core and wake-ups per vCPU per second, by its index, and the
/// jitter of its sample `seq`.
fn figures(i: usize, seq: u64) -> (f64, f64, Option<&'static str>, f64) {
    let (cpu_pct, wakeups, args) = match i % 10 {
        0 | 1 => (5.3, 650.0, Some("console=ttyS0 nohz=off")),
        2 => (4.1, 1004.0, None),
        3 => (78.0, 300.0, None),
        _ => (0.3, 30.0, None),
    };
    let jitter = 1.0 + ((seq as usize * 7 + i * 13) % 11) as f64 / 100.0;
    (cpu_pct, wakeups, args, jitter)
}

/// A guest's figures by its index: a mix like the demo's (docs/measurements.md): most tickless, some
/// ticking at 250 or 1000 Hz, a few busy.
fn guest_sample(host: usize, i: usize, seq: u64) -> GuestSample {
    let (cpu_pct, wakeups, args, jitter) = figures(i, seq);
    GuestSample {
        hypervisor: Hypervisor::Qemu,
        management: Some("libvirt".into()),
        name: format!("guest-{host:03}-{i:03}"),
        uuid: Some(format!("00000000-0000-4000-8000-{host:06}{i:06}")),
        pid: 10_000 + i as u32,
        vcpus: 2,
        host_cpu_seconds: cpu_pct * jitter / 100.0 * 2.0 * 10.0,
        cpu_source: None,
        vcpu_wakeups: (wakeups * jitter * 2.0 * 10.0) as u64,
        wakeups_source: WakeupsSource::VcpuThreads,
        boot_args: args.map(str::to_string),
        uses_kvm: Some(true),
        cpu_parts: None,
        halt_poll_seconds: None,
        platform: None,
        // What a libvirt Linux domain's command line gives, so ingest stores it as it would.
        vm_config: Some(VmConfig {
            hyperv: Some(Vec::new()),
            hpet: Some(true),
            os_hint: None,
        }),
        facts: None,
        // Running totals as an agent sends them (their exact values matter only across gaps,
        // and the bench's reports follow one another), so ingest pays for keeping them.
        totals: Some(ProcessTotals {
            start_ticks: 4242,
            host_cpu_seconds: (seq + 1) as f64 * cpu_pct * 1.1 / 100.0 * 20.0,
            vcpu_wakeups: (seq + 1) * (wakeups * 1.1 * 20.0) as u64,
        }),
    }
}

/// Stores one report through the server, as `POST /api/v1/reports` does after parsing.
async fn store(
    state: &AppState,
    token: tickscope_server::domain::TokenId,
    report: Report,
    received_ms: i64,
) {
    let valid = ingest::validate(report, tickscope_server::clock::now_ms()).unwrap();
    state
        .ingest_report(std::sync::Arc::new(valid), token, received_ms)
        .await
        .unwrap();
}

fn agent(name: &str) -> AgentInfo {
    AgentInfo {
        id: name.into(),
        run_id: "run".into(),
        version: "bench".into(),
    }
}

fn host_info(name: &str) -> HostInfo {
    HostInfo {
        name: name.into(),
        cpus: 64,
        kernel: "6.1.0".into(),
        kvm_halt_poll_ns: Some(200_000),
        boot_id: Some("5c7e1a52-3f0b-4b7e-9d51-0d5a7c9e2b11".into()),
        blind_spots: Vec::new(),
    }
}

/// One guest on a host of its own, reporting every 5 minutes for `days` up to now (a 1000 Hz
/// periodic ticker, so its charts have something to draw). Returns its guest id.
async fn fill_history(state: &AppState, days: i64) -> tickscope_server::domain::GuestId {
    const EVERY_MS: i64 = 5 * 60 * 1000;
    let token = state
        .db
        .insert_token(
            "history",
            tickscope_server::domain::TokenRole::Agent,
            &format!("{:064}", "h"),
            None,
            0,
        )
        .await
        .unwrap();
    let now = tickscope_server::clock::now_ms();
    let reports = days * 24 * 60 * 60 * 1000 / EVERY_MS;
    for n in 0..reports {
        let end_ms = now - (reports - 1 - n) * EVERY_MS;
        let mut sample = guest_sample(0, 2, n as u64);
        sample.name = "history-guest".into();
        sample.uuid = None;
        sample.host_cpu_seconds *= EVERY_MS as f64 / INTERVAL_MS as f64;
        sample.vcpu_wakeups *= (EVERY_MS / INTERVAL_MS) as u64;
        let report = Report {
            agent: agent("bench-history"),
            seq: n as u64,
            host: host_info("bench-hv-history"),
            interval: Interval {
                start_ms: end_ms - EVERY_MS,
                end_ms,
                length_ns: EVERY_MS as u64 * 1_000_000,
            },
            guests: vec![sample],
            dropped_reports: 0,
        };
        store(state, token, report, end_ms).await;
    }
    let guests = state.fleet.ranked(tickscope_server::clock::now_ms()).await;
    guests
        .iter()
        .find(|g| g.name == "history-guest")
        .expect("the history guest is active")
        .id
}

/// Each host's newest report through ingest, its older samples in bulk (see the top).
async fn fill(
    state: &AppState,
    guests: usize,
    per_host: usize,
    intervals: i64,
    now: i64,
) -> Duration {
    let started = Instant::now();
    let hosts = guests.div_ceil(per_host);
    let count = |host: usize| per_host.min(guests - host * per_host);
    for host in 0..hosts {
        let token = state
            .db
            .insert_token(
                &format!("h{host}"),
                tickscope_server::domain::TokenRole::Agent,
                &format!("{host:064}"),
                None,
                now,
            )
            .await
            .unwrap();
        let seq = intervals as u64 - 1;
        let report = Report {
            agent: agent(&format!("bench-{host}")),
            seq,
            host: host_info(&format!("bench-hv-{host:05}")),
            interval: Interval {
                start_ms: now - INTERVAL_MS,
                end_ms: now,
                length_ns: INTERVAL_MS as u64 * 1_000_000,
            },
            guests: (0..count(host))
                .map(|i| guest_sample(host, i, seq))
                .collect(),
            dropped_reports: 0,
        };
        store(state, token, report, now).await;
    }
    let ids = state.db.guest_ids_by_name().await.unwrap();
    let report_id = state.db.any_report_id().await.unwrap();
    let mut rows = Vec::new();
    for host in 0..hosts {
        for i in 0..count(host) {
            let guest_id = ids[&(
                format!("bench-hv-{host:05}"),
                format!("guest-{host:03}-{i:03}"),
            )];
            for n in 0..intervals - 1 {
                let (cpu_pct, wakeups, _, jitter) = figures(i, n as u64);
                let end_ms = now - (intervals - 1 - n) * INTERVAL_MS;
                rows.push(RawSample {
                    guest_id,
                    report_id,
                    end_ms,
                    received_ms: end_ms,
                    length_ms: INTERVAL_MS as f64,
                    vcpus: 2,
                    host_cpu_s: cpu_pct * jitter / 100.0 * 2.0 * 10.0,
                    vcpu_wakeups: (wakeups * jitter * 2.0 * 10.0) as i64,
                    wakeups_source: "vcpu_threads",
                });
            }
        }
        if rows.len() >= 50_000 || host == hosts - 1 {
            state.db.insert_raw_samples(&rows).await.unwrap();
            rows.clear();
        }
    }
    started.elapsed()
}

struct Browser {
    router: Router,
    cookie: String,
}

impl Browser {
    /// Sends a request with the browser's cookie; returns the status, the body and the cookie
    /// the reply set named `cookie_name`, if any.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
        cookie_name: &str,
        accept: Option<&str>,
    ) -> (StatusCode, String, Option<String>) {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::COOKIE, &self.cookie);
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT, accept);
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let response = self
            .router
            .clone()
            .oneshot(request.body(Body::from(body.unwrap_or_default())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let cookie = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with(&format!("{cookie_name}=")))
            .map(|v| v.split(';').next().unwrap().to_string());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned(), cookie)
    }

    async fn login(router: Router, db: &Db) -> Browser {
        let hash = auth::hash_password(PASSWORD).unwrap();
        db.insert_user(
            "bench",
            tickscope_server::domain::UserRole::Viewer,
            &hash,
            tickscope_server::clock::now_ms(),
        )
        .await
        .unwrap();
        let mut browser = Browser {
            router,
            cookie: String::new(),
        };
        let (_, page, cookie) = browser
            .send(Method::GET, "/login", None, "tickscope_login", None)
            .await;
        browser.cookie = cookie.unwrap();
        let at = page.find("name=\"csrf\" value=\"").unwrap() + 19;
        let csrf = &page[at..at + 64];
        let body = format!("name=bench&password=a+long+enough+password&csrf={csrf}");
        let (status, _, cookie) = browser
            .send(
                Method::POST,
                "/login",
                Some(body),
                "tickscope_session",
                None,
            )
            .await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        browser.cookie = cookie.unwrap();
        browser
    }
}

fn print_page(label: &str, median: f64, p95: f64, base_median: f64) {
    println!(
        "  {label:<44} median {median:>8.1}  p95 {p95:>8.1}  ({:.4}x the analysis's median)",
        median / base_median
    );
}

/// (median, p95) of `calls` timings, in ms.
fn percentiles(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

/// `path`'s (median, p95) over `calls` calls, each sent with `accept` as its `Accept` header.
async fn time_page(
    browser: &Browser,
    path: &str,
    accept: Option<&str>,
    calls: usize,
) -> (f64, f64) {
    let (status, body, _) = browser.send(Method::GET, path, None, "", accept).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{path}: {}",
        &body[..body.len().min(300)]
    );
    let mut times = Vec::new();
    for _ in 0..calls {
        let started = Instant::now();
        let (status, _, _) = browser.send(Method::GET, path, None, "", accept).await;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(status, StatusCode::OK);
    }
    percentiles(times)
}

/// The analysis of every active guest from its window, as each ranking page did before.
async fn time_analysis(db: &Db, calls: usize) -> (f64, f64) {
    let mut times = Vec::new();
    for _ in 0..calls {
        let started = Instant::now();
        let current = FleetState::load(db, tickscope_server::clock::now_ms())
            .await
            .unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(!current.ranked(tickscope_server::clock::now_ms()).is_empty());
    }
    percentiles(times)
}

async fn time_baseline(db: &Db, calls: usize) -> (f64, f64) {
    let mut times = Vec::new();
    for _ in 0..calls {
        let started = Instant::now();
        let scope = GuestScope::Active {
            since_ms: tickscope_server::clock::now_ms() - 15 * 60 * 1000,
        };
        let rows = db.window_intervals(scope, 5 * 60 * 1000).await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(!rows.is_empty());
    }
    percentiles(times)
}

#[tokio::main]
async fn main() {
    let intervals: i64 = env_or("BENCH_INTERVALS", "30").parse().unwrap();
    let calls: usize = env_or("BENCH_CALLS", "20").parse().unwrap();
    let baseline_calls: usize = env_or("BENCH_BASELINE_CALLS", "3").parse().unwrap();
    let per_host: usize = env_or("BENCH_HOST_GUESTS", "20").parse().unwrap();
    let history_days: i64 = env_or("BENCH_HISTORY_DAYS", "30").parse().unwrap();
    let fleets: Vec<usize> = env_or("BENCH_FLEETS", "10000,100000")
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    println!(
        "tickscope page latency, {intervals} samples of 10 s per guest, hosts of {per_host} guests, {calls} calls per page, in-process through the router (ms)"
    );
    let mut overview_p95 = Vec::new();
    for guests in fleets {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("bench.db")).await.unwrap();
        let filling = AppState::new(db.clone(), Options::default()).await.unwrap();
        let history_guest = fill_history(&filling, history_days).await;
        let now = tickscope_server::clock::now_ms();
        let filled = fill(&filling, guests, per_host, intervals, now).await;
        filling.fleet.caught_up().await;
        // As a running server would have it: the history guest's samples past 48 hours rolled
        // up into five-minute and hourly summaries.
        let rolled = retention::run(
            &filling,
            Retention::default(),
            tickscope_server::clock::now_ms(),
        )
        .await
        .unwrap();
        drop(filling);
        // A server that starts analyses every active guest's window once.
        let started = Instant::now();
        let state = AppState::new(db.clone(), Options::default()).await.unwrap();
        let loaded = started.elapsed();
        let samples = guests as i64 * intervals;
        let browser = Browser::login(app::router(state), &db).await;
        let guest_id: i64 = 2;
        println!(
            "\n{guests} guests ({samples} samples stored in {:.1} s; one guest with {history_days} days of history; database {:.1} MiB; a starting server analysed them in {:.1} s):",
            filled.as_secs_f64(),
            std::fs::metadata(dir.path().join("bench.db")).map_or(0, |m| m.len()) as f64
                / 1048576.0,
            loaded.as_secs_f64(),
        );
        println!(
            "  (the history guest's {} samples older than 48 h were rolled up into {} windows)",
            rolled.samples_deleted, rolled.windows
        );
        let (read_median, read_p95) = time_baseline(&db, baseline_calls).await;
        println!(
            "  {:<44} median {read_median:>8.1}  p95 {read_p95:>8.1}",
            "baseline: one SQL read of the 5-min window"
        );
        let (base_median, base_p95) = time_analysis(&db, baseline_calls).await;
        println!(
            "  {:<44} median {base_median:>8.1}  p95 {base_p95:>8.1}",
            "baseline: analysing every guest's window"
        );
        for (label, path) in [
            ("overview /", "/".to_string()),
            (
                "guests /guests?mode=periodic&sort=waste",
                "/guests?mode=periodic&sort=waste".to_string(),
            ),
            (
                "guests /guests?mode=periodic&sort=cpu",
                "/guests?mode=periodic&sort=cpu".to_string(),
            ),
            (
                "guests /guests?q=guest-00&sort=name",
                "/guests?q=guest-00&sort=name".to_string(),
            ),
            (
                "guest /guests/{id} (1 h charts)",
                format!("/guests/{guest_id}"),
            ),
            (
                "history guest /guests/{id}?range=30d",
                format!("/guests/{history_guest}?range=30d"),
            ),
            ("hosts /hosts", "/hosts".to_string()),
            ("plan /plan", "/plan".to_string()),
            ("metrics /metrics (classic text)", "/metrics".to_string()),
            ("export /api/v1/plan", "/api/v1/plan".to_string()),
            ("export /api/v1/plan.csv", "/api/v1/plan.csv".to_string()),
            (
                "export /api/v1/guests.csv",
                "/api/v1/guests.csv".to_string(),
            ),
        ] {
            let (median, p95) = time_page(&browser, &path, None, calls).await;
            print_page(label, median, p95, base_median);
            if path == "/" {
                overview_p95.push((guests, p95));
            }
        }
        // What a Prometheus scrape costs: it asks for OpenMetrics.
        let (median, p95) = time_page(&browser, "/metrics", Some(PROMETHEUS_ACCEPT), calls).await;
        print_page("metrics /metrics (OpenMetrics)", median, p95, base_median);
        db.close().await;
    }
    if let [(small, small_p95), .., (large, large_p95)] = overview_p95[..] {
        println!(
            "\noverview p95 grows {:.1}x from {small} to {large} guests ({:.0}x more guests)",
            large_p95 / small_p95,
            large as f64 / small as f64
        );
    }
}
