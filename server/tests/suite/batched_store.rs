//! A batch of reports is stored in one transaction, in sets of distinct hosts and tokens
//! written a few statements a table, a savepoint each; a set that fails is stored again report
//! by report (`db/sql/reports.rs`). Whatever a batch holds (a host's reports one after another, a repeat,
//! a token reporting for a host it is not bound to, a token bound by its first report, a
//! report whose statement fails), what comes of each report and what is stored must be what
//! storing the same reports one at a time gives.

use serde_json::{Value, json};
use tickscope_server::db::{Db, ReportToStore, StoreOutcome, StoreResult};
use tickscope_server::domain::{TokenId, TokenRole};
use tickscope_server::ingest::samples::sample_spans;
use tickscope_server::ingest::{ValidReport, validate};

use crate::common::database::open_test_db;
use crate::common::{guest, report};

/// Reports of this many vCPUs fail to store where a failure is planted.
const FAILING_VCPUS: u32 = 7;

/// Three agent tokens: bound to `hv-a`, bound to `hv-b`, and bound to no host yet.
async fn tokens(db: &Db) -> [TokenId; 3] {
    let mut ids = Vec::new();
    for (name, host) in [("a", Some("hv-a")), ("b", Some("hv-b")), ("c", None)] {
        let secret = tickscope_server::auth::new_token().unwrap();
        let hash = tickscope_server::auth::token_hash(&secret);
        ids.push(
            db.insert_token(name, TokenRole::Agent, &hash, host, 0)
                .await
                .unwrap(),
        );
    }
    ids.try_into().unwrap()
}

fn with_facts(mut guest: Value, kernel: &str, idle: f64) -> Value {
    guest["facts"] = json!({"source": "probe_channel", "received_ms": 0,
                            "facts": {"kernel_release": kernel, "idle_fraction": idle}});
    guest
}

/// `host`'s report `seq` (its interval ending `seq` × 10 s after the first's) with `guests`.
fn host_report(host: &str, seq: u64, guests: Vec<Value>, now_ms: i64) -> Value {
    let mut r = report(seq, guests);
    r["host"]["name"] = json!(host);
    r["agent"]["id"] = json!(format!("machine-{host}"));
    let end_ms = now_ms - 100_000 + seq as i64 * 10_000;
    r["interval"] = json!({"start_ms": end_ms - 10_000, "end_ms": end_ms,
                           "length_ns": 10_000_000_000u64});
    r
}

/// The batch, by the token (0, 1, 2 of [`tokens`]) that sends each report.
fn batch(now_ms: i64) -> Vec<(usize, Value)> {
    let host_report = |host, seq, guests| host_report(host, seq, guests, now_ms);
    let quiet = |kernel| with_facts(guest("quiet", 1, 0.3, 38.0, None), kernel, 0.98);
    let ticker = guest("ticker", 2, 8.6, 572.0, Some("nohz=off"));
    vec![
        (
            0,
            host_report("hv-a", 1, vec![quiet("6.1"), ticker.clone()]),
        ),
        (
            0,
            host_report("hv-a", 2, vec![quiet("6.1"), ticker.clone()]),
        ),
        // A repeat of the first.
        (
            0,
            host_report("hv-a", 1, vec![quiet("6.1"), ticker.clone()]),
        ),
        (1, host_report("hv-b", 1, vec![quiet("5.10")])),
        // A token bound to hv-b reporting for hv-a.
        (1, host_report("hv-a", 3, vec![ticker.clone()])),
        // The unbound token's first report binds it to hv-c; its next one, for hv-d, is refused.
        (2, host_report("hv-c", 1, vec![ticker.clone()])),
        (2, host_report("hv-d", 1, vec![ticker.clone()])),
        // Fails to store where the failure is planted; the rest of the batch does not.
        (
            1,
            host_report(
                "hv-b",
                2,
                vec![guest("big", FAILING_VCPUS, 1.0, 10.0, None)],
            ),
        ),
        (
            0,
            host_report("hv-a", 3, vec![quiet("6.2"), ticker.clone()]),
        ),
        (1, host_report("hv-b", 3, vec![quiet("5.10")])),
    ]
}

/// What came of a report, without the ids the database chose (which depend on the order rows
/// were written in).
fn seen(outcome: &StoreResult<StoreOutcome>) -> String {
    match outcome {
        Ok(StoreOutcome::Duplicate) => "a repeat".into(),
        Err(e) => format!("not stored: {e}"),
        Ok(StoreOutcome::Stored {
            host_reports,
            guests,
            ..
        }) => {
            let guests: Vec<String> = guests
                .iter()
                .map(|g| {
                    let facts = g.facts.as_ref().map(|f| {
                        (
                            f.source.clone(),
                            f.received_ms,
                            f.changed,
                            f.reading.as_ref().map(|r| r.idle_fraction),
                        )
                    });
                    format!(
                        "{} on {} (report {} of {}, seen {}): {} ms, {} s, {} wake-ups, facts {:?}",
                        g.row.identity,
                        g.row.host_name,
                        g.row.last_report_n,
                        g.row.host_reports,
                        g.row.last_seen_ms,
                        g.sample.length_ms,
                        g.sample.host_cpu_s,
                        g.sample.vcpu_wakeups,
                        facts
                    )
                })
                .collect();
            format!("stored as its host's report {host_reports}: {guests:?}")
        }
    }
}

/// What the database holds after the batch, ids left out.
async fn held(db: &Db) -> Value {
    let mut hosts: Vec<Value> = db
        .hosts()
        .await
        .unwrap()
        .into_iter()
        .map(|h| json!([h.name, h.last_report_ms]))
        .collect();
    hosts.sort_by_key(|h| h.to_string());
    let mut guests: Vec<String> = db
        .guest_ids_by_name()
        .await
        .unwrap()
        .into_keys()
        .map(|(host, guest)| format!("{guest} on {host}"))
        .collect();
    guests.sort();
    let tokens: Vec<Value> = db
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|t| json!([t.name, t.host_name, t.last_used_ms.is_some()]))
        .collect();
    let seqs = db.report_sequence("run-1").await.unwrap();
    let (reports, samples) = db.count_reports_and_samples().await.unwrap();
    // Each guest's samples, idle readings and facts as stored, by the guest's name.
    let mut by_name: Vec<((String, String), _)> =
        db.guest_ids_by_name().await.unwrap().into_iter().collect();
    by_name.sort();
    let mut stored = Vec::new();
    for ((host, guest), id) in by_name {
        let (intervals, readings) = db.samples_between(id, 0, i64::MAX / 2, 0).await.unwrap();
        let intervals: Vec<String> = intervals
            .iter()
            .map(|s| {
                format!(
                    "{} {} {} {} {} {:?} {:?}",
                    s.received_ms,
                    s.length_ms,
                    s.host_cpu_s,
                    s.vcpu_wakeups,
                    s.from_vcpu_threads,
                    s.parts,
                    s.halt_poll_s
                )
            })
            .collect();
        let readings: Vec<String> = readings
            .iter()
            .map(|r| {
                format!(
                    "{} {} {:?} {}",
                    r.source, r.received_ms, r.measured_ms, r.idle_fraction
                )
            })
            .collect();
        let facts: Vec<String> = db
            .facts_history(id)
            .await
            .unwrap()
            .iter()
            .map(|f| {
                format!(
                    "{} {} {} {:?} {:?}",
                    f.source, f.first_received_ms, f.received_ms, f.kernel_release, f.cmdline
                )
            })
            .collect();
        stored.push(json!([
            format!("{guest} on {host}"),
            intervals,
            readings,
            facts
        ]));
    }
    json!({"hosts": hosts, "guests": guests, "tokens": tokens, "counts": [reports, samples],
           "seqs": seqs.len(), "stored": stored})
}

/// Stores the batch in one call (`together`) or report by report; says what came of each
/// report and what the database then holds.
async fn store(together: bool, planted_failure: bool, received_ms: i64) -> (Vec<String>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_test_db(dir.path()).await;
    let tokens = tokens(&db).await;
    if planted_failure {
        db.plant_sample_failure(FAILING_VCPUS).await.unwrap();
    }
    let reports: Vec<(TokenId, ValidReport)> = batch(received_ms)
        .into_iter()
        .map(|(token, r)| {
            let r = serde_json::from_value(r).unwrap();
            (tokens[token], validate(r, received_ms).unwrap())
        })
        .collect();
    let items: Vec<ReportToStore<'_>> = reports
        .iter()
        .enumerate()
        .map(|(n, (token_id, report))| ReportToStore {
            report,
            token_id: *token_id,
            // Each its own arrival: facts and guests are stamped with their report's.
            received_ms: received_ms + n as i64,
        })
        .collect();
    let outcomes = if together {
        db.store_reports(&items, sample_spans).await.unwrap()
    } else {
        let mut outcomes = Vec::new();
        for item in &items {
            let (report, token_id) = (item.report, item.token_id);
            let stored = db.store_lone_report(report, token_id, item.received_ms, sample_spans);
            outcomes.push(stored.await);
        }
        outcomes
    };
    (outcomes.iter().map(seen).collect(), held(&db).await)
}

/// Stores the batch together and report by report, at the same clock; asserts both come to
/// the same, and says what came of each report.
async fn stored_together_as_alone(planted_failure: bool) -> Vec<String> {
    let now_ms = tickscope_server::clock::now_ms();
    let (together, held_together) = store(true, planted_failure, now_ms).await;
    let (alone, held_alone) = store(false, planted_failure, now_ms).await;
    assert_eq!(together, alone);
    assert_eq!(held_together, held_alone);
    together
}

#[tokio::test]
async fn a_batch_stores_each_report_as_if_it_were_stored_alone() {
    let together = stored_together_as_alone(false).await;
    // The cases are what the batch meant them to be.
    let kinds: Vec<&str> = together
        .iter()
        .map(|o| o.split(':').next().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "stored as its host's report 1",
            "stored as its host's report 2",
            "a repeat",
            "stored as its host's report 1",
            "not stored",
            "stored as its host's report 1",
            "not stored",
            "stored as its host's report 2",
            "stored as its host's report 3",
            "stored as its host's report 3",
        ]
    );
    // The third report of hv-a brought a new kernel: a change.
    assert!(together[8].contains("true"), "{}", together[8]);
}

#[tokio::test]
async fn a_report_that_fails_to_store_fails_alone_in_its_batch() {
    let together = stored_together_as_alone(true).await;
    assert!(together[7].contains("planted failure"), "{}", together[7]);
    // The report after it of the same host is that host's second, not its third.
    assert!(
        together[9].starts_with("stored as its host's report 2"),
        "{}",
        together[9]
    );
    assert_eq!(
        together.iter().filter(|o| o.starts_with("stored")).count(),
        6
    );
}
