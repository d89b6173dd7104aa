//! Two servers on one PostgreSQL database, as behind a load balancer: agents report to either,
//! and both list the whole fleet; exactly one holds the lease (a PostgreSQL advisory lock) and
//! runs the alert evaluation and the notification senders, so each alert is told once though
//! both run. Killed, its lease passes to the other within 10 s, which goes on telling new
//! alerts, once each, and repeats none of those told before.
//!
//! Several servers share a database only on PostgreSQL: without `TICKSCOPE_TEST_POSTGRES` the
//! tests say so and pass. Ignored by `cargo test` (they run the agent binary, for about half a
//! minute each); `scripts/test.sh` runs them.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::Value;

use common::database::{TestDb, postgres_only};
use common::processes::{Processes, add_token, agent_binary, agent_tokens_file, start_server};
use tickscope_agent::simulate::{Tick, random_fleet};
use tickscope_server::alerts::labels::{fingerprint, parse_set};
use tickscope_server::alerts::webhook::rfc3339;
use tickscope_server::analysis::cost::CostModel;
use tickscope_server::clock::now_ms;
use tickscope_server::db::{AlertRow, Db, ReceiverSettings};
use tickscope_server::state::{AppState, Options};

/// The lease is taken at once by a server that finds it free; a standby retries every 2 s.
const LEASE_PATIENCE: Duration = Duration::from_secs(10);
/// What the lease's design states for a takeover after the holder's `kill -9`.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(10);
/// Servers share what they stored within 2 s (stated); the agents' first reports and a loaded
/// machine need more, never this much.
const FLEET_PATIENCE: Duration = Duration::from_secs(30);
/// Seconds between alert evaluations (`--alert-interval`), and between a host's reports.
const EVERY_S: i64 = 1;
const POLL: Duration = Duration::from_millis(200);
/// The guest rule's threshold, in % of a core. Measured on this test's fleets at 11 h UTC,
/// near the working day's peak: their pollers waste 370-780 % from their first judged report
/// on, every other guest under 30 % at any time.
const THRESHOLD_PCT: f64 = 150.0;

/// A simulated fleet of its own: `tickscope-agent simulate` with hosts `{prefix}-0001` on, each
/// with its own agent token, reporting every second until killed.
struct Fleet {
    prefix: &'static str,
    seed: u64,
}

const HOSTS: usize = 3;
const GUESTS_PER_HOST: usize = 4;

impl Fleet {
    /// Its guests as (host, name): what the agent's simulator makes of the seed.
    fn guests(&self) -> BTreeSet<(String, String)> {
        random_fleet(self.seed, self.prefix, HOSTS, GUESTS_PER_HOST, 0, 1)
            .into_iter()
            .flat_map(|host| {
                let name = host.name;
                host.guests.into_iter().map(move |g| (name.clone(), g.name))
            })
            .collect()
    }

    /// Whether one of its guests polls (`idle=poll`) on four vCPUs or more, runs the probe
    /// (so that its polling is known from its first facts, not guessed from a busy-looking
    /// process) and works little in the day: it wastes some 95 % of a core per vCPU at any
    /// hour, far above [`THRESHOLD_PCT`], which no guest that does not poll comes near.
    fn has_a_steady_poller(&self) -> bool {
        random_fleet(self.seed, self.prefix, HOSTS, GUESTS_PER_HOST, 0, 1)
            .iter()
            .flat_map(|host| &host.guests)
            .any(|g| {
                matches!(g.kernel.tick, Tick::Polling { .. })
                    && g.vcpus >= 4
                    && g.probe
                    && g.day_load < 0.1
                    && g.base_load == 0.0
            })
    }

    /// Makes its hosts' tokens and starts it reporting to `url`; `processes` kills it.
    fn start(&self, db: &TestDb, dir: &Path, url: &str, processes: &mut Processes) {
        let tokens_file = dir.join(format!("{}-tokens", self.prefix));
        agent_tokens_file(db, self.prefix, HOSTS, &tokens_file);
        let simulator = Command::new(agent_binary())
            .args(["simulate", "--server", url, "--host-prefix", self.prefix])
            .args(["--hosts", &HOSTS.to_string()])
            .args(["--guests-per-host", &GUESTS_PER_HOST.to_string()])
            .args(["--interval", &EVERY_S.to_string()])
            .args(["--seed", &self.seed.to_string()])
            .arg("--tokens-file")
            .arg(&tokens_file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{}.log", self.prefix))).unwrap())
            .spawn()
            .unwrap();
        processes.add(&self.simulator(), simulator);
    }

    /// What [`Processes`] knows its simulator as.
    fn simulator(&self) -> String {
        format!("simulator {}", self.prefix)
    }
}

/// What `/readyz` at `url` says of the lease: `held`, `standby`, or, when it says nothing of
/// it, its whole answer (for the failure message).
fn lease(url: &str) -> String {
    let answer: Value = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .get(format!("{url}/readyz"))
        .call()
        .unwrap_or_else(|e| panic!("{url}/readyz: {e}"))
        .into_body()
        .read_json()
        .unwrap();
    match answer["lease"].as_str() {
        Some(lease) => lease.to_string(),
        None => format!("no lease in {answer}"),
    }
}

/// Polls `url`'s `/readyz` until it says it holds the lease; how long that took.
fn wait_to_hold(url: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let said = lease(url);
        if said == "held" {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{url} did not take the lease within {within:?}: /readyz says {said}"
        );
        std::thread::sleep(POLL);
    }
}

/// Polls both servers' `/readyz` until one holds the lease and the other stands by, and
/// returns the holder's index. Both holding it at once fails at once.
fn the_lease_holder(urls: [&str; 2]) -> usize {
    let started = Instant::now();
    loop {
        let said = urls.map(lease);
        match [said[0].as_str(), said[1].as_str()] {
            ["held", "standby"] => return 0,
            ["standby", "held"] => return 1,
            ["held", "held"] => panic!("both servers hold the lease: {urls:?}"),
            _ => {}
        }
        assert!(
            started.elapsed() < LEASE_PATIENCE,
            "no server took the lease within {LEASE_PATIENCE:?}: {urls:?} say {said:?}"
        );
        std::thread::sleep(POLL);
    }
}

/// The guests `url` lists (`GET /api/v1/guests`).
fn listed(url: &str, viewer: &str) -> Vec<Value> {
    let body: Value = ureq::get(format!("{url}/api/v1/guests"))
        .header("Authorization", &format!("Bearer {viewer}"))
        .call()
        .unwrap_or_else(|e| panic!("{url}/api/v1/guests: {e}"))
        .into_body()
        .read_json()
        .unwrap();
    body["guests"].as_array().unwrap().clone()
}

/// The guests `url` lists as (host, name).
fn listed_guests(url: &str, viewer: &str) -> BTreeSet<(String, String)> {
    listed(url, viewer)
        .iter()
        .map(|g| {
            let text = |field: &str| g[field].as_str().unwrap().to_string();
            (text("host"), text("name"))
        })
        .collect()
}

/// A webhook receiver on loopback: every body posted to it, in the order they arrived. It
/// serves on a runtime of its own, so the test around it can block.
struct Hook {
    bodies: Arc<Mutex<Vec<Value>>>,
    url: String,
    _runtime: tokio::runtime::Runtime,
}

impl Hook {
    fn start() -> Hook {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(bodies.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Hook {
            bodies,
            url,
            _runtime: runtime,
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }

    /// Polls until a notification says an alert fires on one of `fleet`'s hosts.
    fn wait_for_firing_on(&self, fleet: &Fleet) {
        let started = Instant::now();
        let host_prefix = format!("{}-", fleet.prefix);
        while !self.bodies().iter().any(|b| {
            b["status"] == "firing"
                && b["subject"]["host"]
                    .as_str()
                    .is_some_and(|h| h.starts_with(&host_prefix))
        }) {
            assert!(
                started.elapsed() < FLEET_PATIENCE,
                "no alert told firing on {host_prefix}* within {FLEET_PATIENCE:?}; told: {:?}",
                self.bodies().iter().map(told).collect::<Vec<_>>()
            );
            std::thread::sleep(POLL);
        }
    }
}

/// A notification in short, for failure messages: `status host/guest`.
fn told(body: &Value) -> String {
    let subject = &body["subject"];
    format!(
        "{} {}/{}",
        body["status"].as_str().unwrap_or_default(),
        subject["host"].as_str().unwrap_or_default(),
        subject["name"].as_str().unwrap_or_default()
    )
}

async fn receive(State(bodies): State<Arc<Mutex<Vec<Value>>>>, Json(body): Json<Value>) {
    bodies.lock().unwrap().push(body);
}

/// What makes a notification the telling of one transition of one alert.
fn transition_of(body: &Value) -> (String, String, String) {
    let text = |field: &str| body[field].as_str().unwrap_or_default().to_string();
    (text("fingerprint"), text("status"), text("fired_at"))
}

/// Fails unless each alert (fingerprint) was told firing once and never resolved. The guests'
/// waste stays far from the threshold and every guest stays active (15 minutes after its last
/// report) for the whole test: an alert told twice came from two evaluators or was resent by
/// the server that took the lease over, and one resolved was about a guest a server lost from
/// its fleet (the survivor forgetting what the dead server's agents reported).
fn assert_each_alert_told_firing_once(bodies: &[Value]) {
    let mut statuses_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for body in bodies {
        let (alert, status, _) = transition_of(body);
        statuses_of.entry(alert).or_default().push(status);
    }
    for (alert, statuses) in &statuses_of {
        // Each telling whole, with its value and summary: why a guest was resolved.
        let tellings: Vec<String> = bodies
            .iter()
            .filter(|b| transition_of(b).0 == *alert)
            .map(|b| {
                format!(
                    "{} at {}: {} ({})",
                    told(b),
                    b["at"],
                    b["value"],
                    b["summary"]
                )
            })
            .collect();
        assert_eq!(
            statuses,
            &["firing"],
            "alert {alert} was told {statuses:?}: {tellings:#?}"
        );
    }
}

/// The test's own connection to the database beside the servers', on a runtime of its own (a
/// pool belongs to the runtime that opened it), for a test that blocks.
struct Store {
    db: Db,
    runtime: tokio::runtime::Runtime,
}

impl Store {
    fn open(test_db: &TestDb) -> Store {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let db = runtime.block_on(test_db.open());
        Store { db, runtime }
    }

    fn open_alerts(&self) -> Vec<AlertRow> {
        self.runtime.block_on(self.db.open_alerts()).unwrap()
    }
}

/// Fails unless every alert the database holds as firing since before `fired_before_ms` (long
/// enough to have been sent) was told firing exactly once, and no guest has two open alerts
/// under one rule (what a second evaluator would open).
fn assert_firing_alerts_told_once(store: &Store, bodies: &[Value], fired_before_ms: i64) {
    let open = store.open_alerts();
    let mut subjects = BTreeSet::new();
    let mut checked = 0;
    for alert in &open {
        assert!(
            subjects.insert((alert.rule_id, alert.subject, alert.subject_id)),
            "two open alerts of rule {:?} about {} {}",
            alert.rule_id,
            alert.subject,
            alert.subject_name
        );
        let Some(fired_ms) = alert.fired_ms.filter(|&ms| ms < fired_before_ms) else {
            continue;
        };
        let told = (
            fingerprint(&parse_set(&alert.labels_json)),
            "firing".to_string(),
            rfc3339(fired_ms),
        );
        let times = bodies.iter().filter(|b| transition_of(b) == told).count();
        checked += 1;
        assert_eq!(
            times, 1,
            "the alert about {} on {} (id {:?}) was told firing {times} times",
            alert.subject_name, alert.host_name, alert.id
        );
    }
    assert!(
        checked > 0,
        "no alert fired before the mark: nothing was checked"
    );
}

/// Polls until the alert evaluation has run `evaluations` more times, as the open alerts'
/// `evaluated_ms` shows (an open alert that holds is written again within five evaluations, so
/// this may wait up to five longer): long enough for anything told twice to have arrived.
fn wait_for_evaluations(store: &Store, evaluations: i64) {
    let after_ms = now_ms() + (evaluations - 1) * EVERY_S * 1000;
    let started = Instant::now();
    loop {
        let open = store.open_alerts();
        if !open.is_empty() && open.iter().all(|a| a.evaluated_ms >= after_ms) {
            return;
        }
        assert!(
            started.elapsed() < FLEET_PATIENCE,
            "{evaluations} evaluations did not run within {FLEET_PATIENCE:?}"
        );
        std::thread::sleep(POLL);
    }
}

#[test]
#[ignore = "runs two servers and the agent's simulator on PostgreSQL; run by scripts/test.sh"]
fn two_servers_on_one_postgresql_share_the_fleet_and_one_holds_the_lease() {
    if postgres_only("two_servers_on_one_postgresql_share_the_fleet_and_one_holds_the_lease") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let db = TestDb::new_blocking(work.path(), "t.db");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let urls = [
        start_server(&db, &[], &mut processes),
        start_server(&db, &[], &mut processes),
    ];
    let urls = [urls[0].as_str(), urls[1].as_str()];

    // One takes the lease, the other stands by, and the standby's retries (every 2 s) do not
    // take it from a holder that lives.
    let holder = the_lease_holder(urls);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        assert_eq!(the_lease_holder(urls), holder, "the lease moved: {urls:?}");
        std::thread::sleep(POLL);
    }

    // Each server gets the reports of its own fleet only, as behind a load balancer that
    // sends each agent to one of them; each must list both fleets.
    let (east, west) = (
        Fleet {
            prefix: "east",
            seed: 11,
        },
        Fleet {
            prefix: "west",
            seed: 12,
        },
    );
    east.start(&db, work.path(), urls[0], &mut processes);
    west.start(&db, work.path(), urls[1], &mut processes);
    let expected: BTreeSet<(String, String)> =
        east.guests().union(&west.guests()).cloned().collect();
    let started = Instant::now();
    loop {
        let listed = urls.map(|url| listed_guests(url, &viewer));
        if listed.iter().all(|l| *l == expected) {
            break;
        }
        assert!(
            started.elapsed() < FLEET_PATIENCE,
            "after {FLEET_PATIENCE:?} the servers do not both list both fleets; the first \
             misses {:?}, the second {:?}; the first lists more: {:?}, the second {:?}",
            expected.difference(&listed[0]).collect::<Vec<_>>(),
            expected.difference(&listed[1]).collect::<Vec<_>>(),
            listed[0].difference(&expected).collect::<Vec<_>>(),
            listed[1].difference(&expected).collect::<Vec<_>>(),
        );
        std::thread::sleep(POLL);
    }
    eprintln!(
        "both servers list all {} guests of both fleets {:?} after the simulators started",
        expected.len(),
        started.elapsed()
    );
    // Reporting moved no lease.
    assert_eq!(the_lease_holder(urls), holder);

    // Both analysed the same: once the fleets stop, each guest's figures agree on both (the
    // receiving server applied each report in memory, the other read it back; the
    // incremental and the full analysis must give one answer). Some reports first, so that
    // the other server has read each host again more than once.
    let reporting = Instant::now();
    while urls.iter().any(|url| fewest_intervals(url, &viewer) < 3) {
        assert!(
            reporting.elapsed() < FLEET_PATIENCE,
            "after {FLEET_PATIENCE:?} a server still has a guest with fewer than 3 intervals: \
             {} and {}",
            fewest_intervals(urls[0], &viewer),
            fewest_intervals(urls[1], &viewer)
        );
        std::thread::sleep(POLL);
    }
    processes.kill(&east.simulator());
    processes.kill(&west.simulator());
    let stopped = Instant::now();
    loop {
        let analysed = urls.map(|url| analysed_guests(url, &viewer));
        if analysed[0] == analysed[1] {
            assert_eq!(analysed[0].len(), expected.len());
            break;
        }
        assert!(
            stopped.elapsed() < FLEET_PATIENCE,
            "after {FLEET_PATIENCE:?} the servers analyse the stopped fleets differently: {:?}",
            analysed[0]
                .iter()
                .filter(|(guest, figures)| analysed[1].get(*guest) != Some(*figures))
                .map(|(guest, figures)| (guest, figures, analysed[1].get(guest)))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(POLL);
    }

    // Each read what the other stored, each read one host at least, and says so to Prometheus.
    for url in urls {
        let (reads, hosts, timed) = follower_reads(url, &viewer);
        assert!(reads > 0, "{url} says it read nothing the other stored");
        assert!(
            hosts >= reads,
            "{url} read {hosts} hosts in {reads} reads: a read takes one at least"
        );
        // The counter and the histogram are two families of one scrape: a read that ends
        // while it is written may be in one and not yet in the other.
        assert!(
            timed.abs_diff(reads) <= 1,
            "{url}: {reads} reads, {timed} in the histogram of their time"
        );
    }
}

/// What `url`'s `/metrics` says of its reads of what the other servers stored: how many, the
/// hosts they read, and how many reads its histogram of their durations counts.
fn follower_reads(url: &str, viewer: &str) -> (u64, u64, u64) {
    let body = ureq::get(format!("{url}/metrics"))
        .header("Authorization", &format!("Bearer {viewer}"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    let value = |name: &str| {
        body.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in {url}/metrics"))
            .parse::<u64>()
            .unwrap()
    };
    (
        value("tickscope_follower_reads_total"),
        value("tickscope_follower_hosts_read_total"),
        value("tickscope_follower_read_duration_seconds_count"),
    )
}

/// The fewest intervals any guest listed at `url` has in its window.
fn fewest_intervals(url: &str, viewer: &str) -> i64 {
    listed(url, viewer)
        .iter()
        .map(|g| g["intervals"].as_i64().unwrap())
        .min()
        .unwrap_or(0)
}

/// Each guest's tick mode and figures as `url` analyses it, by (host, name).
fn analysed_guests(url: &str, viewer: &str) -> BTreeMap<(String, String), String> {
    listed(url, viewer)
        .iter()
        .map(|g| {
            let text = |field: &str| g[field].as_str().unwrap().to_string();
            // Six decimals: the same rows summed in another order may differ in the last bit.
            let figure = |field: &str| format!("{:.6}", g[field].as_f64().unwrap_or(f64::NAN));
            (
                (text("host"), text("name")),
                // The last report seen and the intervals in the window show each report was
                // taken in; the simulator's figures alone may not change from one to the next.
                format!(
                    "last seen {} intervals {} window {} {} cpu {} wakeups {} wasted {}",
                    g["last_seen_ms"],
                    g["intervals"],
                    figure("window_s"),
                    text("tick_mode"),
                    figure("host_cpu_pct"),
                    figure("wakeups_per_vcpu"),
                    figure("wasted_cpu_pct")
                ),
            )
        })
        .collect()
}

#[test]
#[ignore = "runs two servers and the agent's simulator on PostgreSQL; run by scripts/test.sh"]
fn an_alert_is_delivered_once_and_the_lease_moves_when_its_holder_is_killed() {
    if postgres_only("an_alert_is_delivered_once_and_the_lease_moves_when_its_holder_is_killed") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let hook = Hook::start();
    let test_db = TestDb::new_blocking(work.path(), "t.db");
    let store = Store::open(&test_db);
    // The guest rule fires above THRESHOLD_PCT held for 5 s: only the fleets' pollers, whose
    // waste stays hundreds of points away from it, so that no alert flaps (a threshold of 3 %
    // once met a guest whose inferred halt polling read 3.09 % and then 2.90 %, which was told
    // as a resolution). Not at once: a guest's first report or two can be judged otherwise
    // than it then stays. Each change is told alone and at once (plain JSON, no group wait),
    // so that each body is one transition of one alert.
    store
        .runtime
        .block_on(common::set_guest_rule_with_threshold(
            &store.db,
            5,
            true,
            Some(THRESHOLD_PCT),
        ));
    let receiver = ReceiverSettings {
        group_wait_s: 0,
        group_interval_s: 0,
        ..ReceiverSettings::new("team", &hook.url, "json")
    };
    store
        .runtime
        .block_on(store.db.insert_receiver(&receiver, 0))
        .unwrap();

    // The first server started takes the lease before the second starts: it is the one
    // `Processes::kill` finds first (both are added as "tickscope-server").
    let mut processes = Processes::default();
    let every = EVERY_S.to_string();
    // The receiver listens on loopback, which notifications reach only when allowed.
    let args = [
        "--alert-interval",
        every.as_str(),
        "--allow-receiver-networks",
        "127.0.0.0/8",
    ];
    let first = start_server(&test_db, &args, &mut processes);
    wait_to_hold(&first, LEASE_PATIENCE);
    let second = start_server(&test_db, &args, &mut processes);
    assert_eq!(
        the_lease_holder([&first, &second]),
        0,
        "the lease moved to the server started second"
    );

    // Each fleet reports to one server: the holder tells the alerts of guests reported to the
    // standby as well as its own, and the standby tells none.
    let (east, west, north) = (
        Fleet {
            prefix: "east",
            seed: 80,
        },
        Fleet {
            prefix: "west",
            seed: 22,
        },
        Fleet {
            prefix: "north",
            seed: 95,
        },
    );
    for fleet in [&east, &west, &north] {
        assert!(
            fleet.has_a_steady_poller(),
            "seed {} gives {} no guest to alert on",
            fleet.seed,
            fleet.prefix
        );
    }
    east.start(&test_db, work.path(), &first, &mut processes);
    west.start(&test_db, work.path(), &second, &mut processes);
    hook.wait_for_firing_on(&east);
    hook.wait_for_firing_on(&west);
    let mark_ms = now_ms();
    wait_for_evaluations(&store, 3);
    let told_before_kill = hook.bodies();
    assert_each_alert_told_firing_once(&told_before_kill);
    assert_firing_alerts_told_once(&store, &told_before_kill, mark_ms);

    // kill -9 the holder: its session ends, its advisory lock with it, and the standby's next
    // try takes it.
    processes.kill("tickscope-server");
    let took = wait_to_hold(&second, TAKEOVER_WITHIN);
    eprintln!("the standby took the lease {took:?} after the holder's kill -9");
    // Its agents have no server left; what they reported stays in the fleet.
    processes.kill(&east.simulator());

    // A new fleet reporting to the survivor: its alerts are told, once each, and none of those
    // told before is told again (nor resolved: the survivor kept the dead server's guests).
    north.start(&test_db, work.path(), &second, &mut processes);
    hook.wait_for_firing_on(&north);
    let mark_ms = now_ms();
    wait_for_evaluations(&store, 3);
    let told = hook.bodies();
    assert_each_alert_told_firing_once(&told);
    assert_firing_alerts_told_once(&store, &told, mark_ms);
}

/// A second server's state on the database of `s`, following the others as `serve` does.
async fn second_server(s: &common::Server) -> AppState {
    let other = AppState::new(s.test_db.open().await, Options::default())
        .await
        .unwrap();
    tickscope_server::cluster::follow::spawn(other.clone());
    other
}

/// The one server that found the lease free holds it; a second on the same database stands by.
/// On SQLite the one server always holds it.
#[tokio::test]
async fn the_first_server_holds_the_lease_and_a_second_stands_by() {
    let s = common::server().await;
    assert!(s.state.lease.held(), "a lone server holds the lease");
    if postgres_only("the_first_server_holds_the_lease_and_a_second_stands_by") {
        return;
    }
    let other = second_server(&s).await;
    assert!(!other.lease.held(), "a second server took a held lease");
    assert_eq!(other.lease.state(), "standby");
}

/// A cost model an admin saves on one server is in force on the other, which prices waste
/// with it on its pages and in its API.
#[tokio::test]
async fn a_cost_model_saved_on_one_server_is_in_force_on_the_other() {
    if postgres_only("a_cost_model_saved_on_one_server_is_in_force_on_the_other") {
        return;
    }
    let s = common::server().await;
    let other = second_server(&s).await;
    let model = CostModel {
        watts_per_busy_core: 11.0,
        price_per_kwh: 0.4,
        currency: "CHF".into(),
    };
    assert_ne!(other.cost_model(), model);
    s.state
        .set_cost_model(model.clone(), "alice")
        .await
        .unwrap();
    let saved = Instant::now();
    while other.cost_model() != model {
        assert!(
            saved.elapsed() < FLEET_PATIENCE,
            "the other server still prices with {:?}",
            other.cost_model()
        );
        tokio::time::sleep(POLL).await;
    }
}
