//! The live fleet is kept up to date from what each report stored, never reading its window back
//! (`fleet::state`). After any sequence of reports (guests coming and going, VM restarts,
//! facts from two sources, kernel changes, repeats, silences past the active limit) it must hold
//! exactly what a full analysis of the stored windows gives; and a reader never waits for the
//! writer.

use crate::common;
use crate::common::database::RawDb;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use common::{guest, manual_clock, server, server_with_clock};
use tickscope_server::analysis::cost::CostModel;
use tickscope_server::auth;
use tickscope_server::clock::{Clock, ManualClock};
use tickscope_server::db::GuestScope;
use tickscope_server::fleet::listing::{Column, Facet, GuestFilter, Order};
use tickscope_server::fleet::{self, ACTIVE_WITHIN_MS};
use tickscope_server::state::Options;

const NAMES: [&str; 4] = ["alpha", "bravo", "charlie", "delta"];
const RELEASES: [&str; 3] = ["5.10.0-30-amd64", "6.1.0-57-amd64", "6.12.0-1-amd64"];

/// One guest in one report.
#[derive(Debug, Clone)]
struct GuestStep {
    cpu_pct: f64,
    wakeups: f64,
    /// Bumps the VM's pid: a new process, whose earlier facts no longer hold.
    restart: bool,
    /// Facts the probe (or the guest agent) delivered with the report: release, idle fraction,
    /// whether the command line keeps the tick.
    facts: Option<(usize, f64, bool, bool)>,
}

/// One report of one host, after `advance_s` seconds.
#[derive(Debug, Clone)]
struct Step {
    host: usize,
    guests: Vec<Option<GuestStep>>,
    advance_s: i64,
    /// Sends the host's previous report again instead (an agent retrying).
    repeat: bool,
}

fn guest_step() -> impl Strategy<Value = GuestStep> {
    (
        0.05f64..40.0,
        5.0f64..1000.0,
        prop::bool::weighted(0.1),
        prop::option::weighted(
            0.4,
            (
                0..RELEASES.len(),
                0.0f64..=1.0,
                any::<bool>(),
                any::<bool>(),
            ),
        ),
    )
        .prop_map(|(cpu_pct, wakeups, restart, facts)| GuestStep {
            cpu_pct,
            wakeups,
            restart,
            facts,
        })
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..2usize,
        prop::collection::vec(prop::option::weighted(0.8, guest_step()), NAMES.len()),
        prop::sample::select(vec![1i64, 10, 10, 10, 30, 200, 1_000]),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(host, guests, advance_s, repeat)| Step {
            host,
            guests,
            advance_s,
            repeat,
        })
}

/// A fleet's analysis as comparable JSON, by guest id.
fn by_id(mut guests: Vec<Value>) -> Value {
    guests.sort_by_key(|g| g["id"].as_i64());
    Value::Array(guests)
}

struct Fleet {
    s: common::Server,
    clock: Arc<ManualClock>,
    tokens: Vec<String>,
    seq: [u64; 2],
    pids: [[u32; 4]; 2],
    last: [Option<Value>; 2],
}

impl Fleet {
    async fn new() -> Fleet {
        let clock = manual_clock();
        let s = server_with_clock(Options::default(), clock.clone()).await;
        let second = auth::new_token().unwrap();
        s.db.insert_token(
            "hv-1",
            tickscope_server::domain::TokenRole::Agent,
            &auth::token_hash(&second),
            None,
            0,
        )
        .await
        .unwrap();
        Fleet {
            tokens: vec![s.agent_token.clone(), second],
            s,
            clock,
            seq: [0; 2],
            pids: [[100, 200, 300, 400], [500, 600, 700, 800]],
            last: [None, None],
        }
    }

    fn report(&mut self, step: &Step) -> Value {
        let h = step.host;
        self.seq[h] += 1;
        let end = self.clock.now_ms() - 1000;
        let guests: Vec<Value> = step
            .guests
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((i, g.as_ref()?)))
            .map(|(i, g)| {
                if g.restart {
                    self.pids[h][i] += 1;
                }
                let mut v = guest(NAMES[i], 1 + i as u32 % 2, g.cpu_pct, g.wakeups, None);
                v["pid"] = json!(self.pids[h][i]);
                v["host_cpu_seconds"] = json!(g.cpu_pct / 100.0 * 10.0);
                if let Some((release, idle, ticking, agent)) = g.facts {
                    let cmdline = if ticking { "quiet nohz=off" } else { "quiet" };
                    let (source, facts) = if agent {
                        (
                            "qemu_guest_agent",
                            json!({"collected_ms": end, "kernel_release": RELEASES[release]}),
                        )
                    } else {
                        (
                            "probe_channel",
                            json!({
                                "collected_ms": end, "kernel_release": RELEASES[release],
                                "config": {"source": "boot_config", "hz": 1000, "hz_periodic": ticking},
                                "measured_hz": if ticking { 1000.0 } else { 40.0 },
                                "cmdline": cmdline, "idle_fraction": idle, "idle_measured_s": 10.0,
                                "cpus": 1
                            }),
                        )
                    };
                    v["facts"] = json!({"source": source, "received_ms": end, "facts": facts});
                }
                v
            })
            .collect();
        json!({
            "agent": {"id": format!("machine-{h}"), "run_id": "run-1", "version": "0.1.0"},
            "seq": self.seq[h],
            "host": {"name": format!("hv-{h}"), "cpus": 8, "kernel": "6.1.0-57-cloud-amd64",
                     "kvm_halt_poll_ns": 200_000 + self.seq[h]},
            "interval": {"start_ms": end - 10_000, "end_ms": end, "length_ns": 10_000_000_000u64},
            "guests": guests
        })
    }

    async fn run(&mut self, step: &Step) {
        self.clock.advance_ms(step.advance_s * 1000);
        let h = step.host;
        let report = match (&self.last[h], step.repeat) {
            (Some(last), true) => last.clone(),
            _ => self.report(step),
        };
        let reply = self.s.post_report(Some(&self.tokens[h]), &report).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        self.last[h] = Some(report);
        self.check(&format!("hv-{h}")).await;
    }

    /// The host's guests as held, against a full analysis of what is stored, both as of the
    /// host's last analysis (a repeated report stores nothing and analyses nothing again).
    async fn check(&self, host: &str) {
        let now = self
            .s
            .state
            .fleet
            .ranked(self.clock.now_ms())
            .await
            .iter()
            .filter(|g| g.host == host)
            .map(|g| g.analysed_ms)
            .max()
            .unwrap_or_else(|| self.clock.now_ms());
        let held: Vec<Value> = self
            .s
            .state
            .fleet
            .ranked(now)
            .await
            .iter()
            .filter(|g| g.host == host)
            .map(|g| serde_json::to_value(g.as_ref()).unwrap())
            .collect();
        let scope = GuestScope::Active {
            since_ms: now - ACTIVE_WITHIN_MS,
        };
        let full: Vec<Value> = fleet::analyse_stored(&self.s.db, scope, now)
            .await
            .unwrap()
            .iter()
            .filter(|g| g.host == host)
            .map(|g| serde_json::to_value(g).unwrap())
            .collect();
        assert_eq!(by_id(held), by_id(full), "{host} at {now}");
        self.check_kept(now);
    }

    /// What is kept up to date over the whole fleet for the pages (the counts and sums, every
    /// list order) against the same computed afresh from the ranked guests.
    fn check_kept(&self, now: i64) {
        let published = self.s.state.fleet.published();
        let ranked: Vec<Arc<fleet::AnalysedGuest>> = published.ranked(now).cloned().collect();
        let index = published.index(now);
        let model = CostModel::default();
        assert_eq!(
            json(&index.totals(&model)),
            json(&fleet::totals(&ranked, &model))
        );
        assert_eq!(
            json(&index.hosts_by_waste(&model).collect::<Vec<_>>()),
            json(&fleet::host_totals(&ranked, &model))
        );
        for facet in Facet::ALL {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for g in &ranked {
                *counts.entry(facet.value(g).into_owned()).or_default() += 1;
            }
            let kept: BTreeMap<String, usize> = index
                .values(facet)
                .map(|(value, n)| (value.to_string(), n))
                .collect();
            assert_eq!(kept, counts, "{facet:?} at {now}");
        }
        let filter = GuestFilter::default();
        for column in Column::ALL {
            for descending in [false, true] {
                let order = Order { column, descending };
                let listed = published.list(order, &filter, None, now);
                let walked: Vec<i64> = listed.guests.map(|g| g.id.0).collect();
                let sorted: Vec<i64> = order
                    .sorted(&ranked, &filter, None)
                    .iter()
                    .map(|g| g.id.0)
                    .collect();
                assert_eq!(walked, sorted, "{order:?} at {now}");
                assert_eq!(listed.matching, sorted.len(), "{order:?} at {now}");
            }
        }
    }
}

/// An answer as JSON, to compare two whole.
fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_fleet_kept_up_to_date_is_a_full_analysis_of_what_is_stored(
        steps in prop::collection::vec(step(), 1..30)
    ) {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let mut fleet = Fleet::new().await;
            for step in &steps {
                fleet.run(step).await;
            }
        });
    }
}

/// The same once through guests that fall silent past the active limit and come back (the
/// memory forgets them; their return reads them from the database), with a restart of the
/// server's analysis in between.
#[tokio::test]
async fn guests_that_come_back_after_the_active_limit_are_read_again() {
    let mut fleet = Fleet::new().await;
    let all = |advance_s| Step {
        host: 0,
        guests: (0..NAMES.len())
            .map(|i| {
                Some(GuestStep {
                    cpu_pct: 5.0 + i as f64,
                    wakeups: 900.0,
                    restart: false,
                    facts: Some((1, 0.99, true, false)),
                })
            })
            .collect(),
        advance_s,
        repeat: false,
    };
    for _ in 0..3 {
        fleet.run(&all(10)).await;
    }
    // Only the first guest reports for longer than the active limit.
    let mut one = all(60);
    one.guests.iter_mut().skip(1).for_each(|g| *g = None);
    for _ in 0..(ACTIVE_WITHIN_MS / 60_000 + 2) {
        fleet.run(&one).await;
    }
    let now = fleet.clock.now_ms();
    assert_eq!(fleet.s.state.fleet.ranked(now).await.len(), 1);
    // The host is forgotten by the retention's sweep after a long silence, and comes back.
    fleet.clock.advance_ms(ACTIVE_WITHIN_MS + 1);
    assert_eq!(fleet.s.state.fleet.forget_silent(fleet.clock.now_ms()), 1);
    fleet.run(&all(10)).await;
    fleet.run(&all(10)).await;
    assert_eq!(
        fleet.s.state.fleet.ranked(fleet.clock.now_ms()).await.len(),
        4
    );
}

/// While the writer waits for the database (another connection holds its write lock), pages and
/// the API answer from the fleet as it is; the report is stored, and shown, once the lock goes.
#[tokio::test]
async fn a_reader_never_waits_for_the_writer() {
    let s = server().await;
    let first = s
        .post_report(Some(&s.agent_token), &common::fleet_report(1))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);

    let mut other = RawDb::connect(&s.test_db).await;
    other.hold_write_lock().await;
    let mut r = common::fleet_report(2);
    r["guests"]
        .as_array_mut()
        .unwrap()
        .push(guest("newcomer", 1, 4.0, 800.0, None));
    let report = s.post_report(Some(&s.agent_token), &r);
    tokio::pin!(report);
    // Let the report reach the writer, which now waits for the lock (a wait, not a measure).
    tokio::select! {
        stored = &mut report => panic!("stored although the database was locked: {}", stored.body),
        _ = tokio::time::sleep(std::time::Duration::from_millis(300)) => {}
    }
    let page = s
        .call(
            axum::http::Method::GET,
            "/api/v1/guests",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("newcomer"), "{}", page.body);
    tokio::select! {
        biased;
        stored = &mut report => panic!("stored although the database was locked: {}", stored.body),
        _ = std::future::ready(()) => {}
    }

    other.release().await;
    let stored = report.await;
    assert_eq!(stored.status, 200, "{}", stored.body);
    // Acknowledged means shown: no wait for an analysis after the answer.
    let page = s
        .call(
            axum::http::Method::GET,
            "/api/v1/guests",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert!(page.body.contains("newcomer"), "{}", page.body);
}

/// A write lock held past the busy timeout (5 s: another connection, a stuck writer) makes a
/// report wait that long and no longer: it is answered "retry later" with nothing stored, on
/// either backend, and stored whole once the lock goes.
#[tokio::test]
async fn a_write_lock_held_too_long_is_answered_retry_later() {
    let s = server().await;
    let mut other = RawDb::connect(&s.test_db).await;
    other.hold_write_lock().await;
    let reply = s
        .post_report(Some(&s.agent_token), &common::fleet_report(1))
        .await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(
        reply.json()["error"]["code"],
        "unavailable",
        "{}",
        reply.body
    );
    other.release().await;
    assert_eq!(s.stored().await, (0, 0));
    let again = s
        .post_report(Some(&s.agent_token), &common::fleet_report(1))
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(s.stored().await.0, 1);
}
