//! The demo fleet behind the README's first command.

use crate::common::database::open_test_db;
use std::sync::Arc;
use tickscope_server::analysis::cause::Cause;
use tickscope_server::analysis::tick_mode::TickMode;
use tickscope_server::clock::now_ms;
use tickscope_server::demo;
use tickscope_server::fleet::AnalysedGuest;
use tickscope_server::fleet::listing::GuestFilter;
use tickscope_server::state::{AppState, Options};

/// The demo is seeded from the clock and its guests work office hours (UTC), so it is checked
/// for several seeds at hours around the day: one CI run once met a seed that filed a Windows
/// guest under halt polling.
#[tokio::test]
async fn demo_fills_an_empty_database_with_a_ranked_fleet() {
    let midnight = now_ms() / 86_400_000 * 86_400_000;
    for (i, hour) in [2_i64, 6, 9, 13, 17, 22].into_iter().enumerate() {
        let seed = 1_765_000_000_000 + i as u64 * 7_919;
        let dir = tempfile::tempdir().unwrap();
        let db = open_test_db(dir.path()).await;
        // Yesterday, so that the backfill and the ranking are in the past of the wall clock.
        let at_ms = midnight - 86_400_000 + hour * 3_600_000 + 1_234_567;
        let clock = Arc::new(tickscope_server::clock::ManualClock::new(at_ms));
        let state = AppState::with_clock(db, Options::default(), clock)
            .await
            .unwrap();
        demo::start_seeded(&state, seed).await.unwrap();
        let guests = state.fleet.ranked(at_ms).await;
        let checked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_the_cast(&guests)));
        if let Err(panic) = checked {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("seed {seed} at {hour} h UTC: {message}");
        }
    }
}

/// What the demo's cast must show whatever its seed: every tick mode, each platform cause with
/// its fix, the platform names.
fn check_the_cast(guests: &[Arc<AnalysedGuest>]) {
    assert_eq!(guests.len(), 19);
    let modes: Vec<TickMode> = guests
        .iter()
        .map(|g| g.verdict.classification.mode)
        .collect();
    for mode in [
        TickMode::Tickless,
        TickMode::Periodic,
        TickMode::Polling,
        TickMode::Busy,
    ] {
        assert!(
            modes.contains(&mode),
            "no {mode:?} guest in the demo: {modes:?}"
        );
    }
    assert_eq!(guests[0].name, "rt-lab", "the polling guest wastes most");
    assert!(
        guests.iter().all(|g| g.intervals >= 30),
        "the backfill covers the window"
    );
    // Each platform cause of the cast gets its fix, and no Windows guest a Linux one.
    let rules = |name: &str| -> Vec<&'static str> {
        let g = guests.iter().find(|g| g.name == name).unwrap();
        g.verdict.suggestions.iter().map(|s| s.rule).collect()
    };
    let guest = |name: &str| guests.iter().find(|g| g.name == name).unwrap();
    for (name, rule, cause) in [
        ("win-fileserver", "hyperv_timers", Cause::WindowsTimers),
        (
            "win-desktop",
            "windows_timer_resolution",
            Cause::GuestPrograms,
        ),
        (
            "appliance-pit",
            "emulated_tick_device",
            Cause::EmulatedTimer,
        ),
        ("db-replica", "iothread_polling", Cause::VmThreads),
        ("cache-01", "lower_host_halt_poll", Cause::HostHaltPolling),
        (
            "win-rdp-01",
            "windows_timer_resolution",
            Cause::GuestPrograms,
        ),
        ("rt-lab", "remove_idle_poll", Cause::GuestPolling),
    ] {
        assert_eq!(
            rules(name).first(),
            Some(&rule),
            "{name}: {:?}",
            rules(name)
        );
        // Filed under its cause, and ranked by what that cause wastes.
        let g = guest(name);
        assert_eq!(g.verdict.cause, Some(cause), "{name}");
        assert!(
            g.wasted_cpu_pct() > 0.0,
            "{name}: {}",
            g.verdict.waste.reasoning
        );
    }
    // The plan puts each cause's guests in groups of their own.
    let plan = tickscope_server::fleet::plan(guests);
    for name in ["win-fileserver", "cache-01", "db-replica"] {
        let cause = guest(name).verdict.cause;
        let group = plan
            .iter()
            .find(|p| p.members.iter().any(|m| m.name == name))
            .unwrap();
        assert_eq!(group.cause, cause, "{name}");
        assert!(
            group.key.starts_with(cause.unwrap().as_str()),
            "{}",
            group.key
        );
    }
    // A guest is found by the name its platform gives it, not only by QEMU's.
    let by_platform = GuestFilter {
        q: "WEB-FRONTEND".into(),
        ..GuestFilter::default()
    };
    let found: Vec<&str> = guests
        .iter()
        .filter(|g| by_platform.keeps(g))
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(found, ["instance-0000a1b2"]);
    // Named as their platforms name them.
    let platform = |name: &str| {
        let g = guests.iter().find(|g| g.name == name).unwrap();
        g.platform.clone().map(|p| (p.kind, p.name))
    };
    assert_eq!(
        platform("instance-0000a1b2"),
        Some(("openstack".to_string(), Some("web-frontend-3".to_string())))
    );
    assert_eq!(
        platform("win-rdp-01"),
        Some(("proxmox".to_string(), Some("win-rdp-01".to_string())))
    );
    for name in ["win-fileserver", "win-desktop", "win-rdp-01"] {
        let linux = [
            "check_guest_kernel",
            "remove_nohz_off",
            "find_user_space_wakeups",
            "busy_or_polling",
        ];
        assert!(
            rules(name).iter().all(|r| !linux.contains(r)),
            "{name}: {:?}",
            rules(name)
        );
    }
    assert!(
        !rules("appliance-pit").contains(&"check_guest_kernel"),
        "a tickless-built kernel on the PIT is not told to become tickless"
    );
}

#[tokio::test]
async fn demo_refuses_a_database_real_agents_report_to() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_test_db(dir.path()).await;
    let token = tickscope_server::auth::new_token().unwrap();
    let token_id = db
        .insert_token(
            "a",
            tickscope_server::domain::TokenRole::Agent,
            &tickscope_server::auth::token_hash(&token),
            None,
            now_ms(),
        )
        .await
        .unwrap();
    let report: tickscope_wire::Report = serde_json::from_value(serde_json::json!({
        "agent": {"id": "m", "run_id": "r", "version": "1"},
        "seq": 0,
        "host": {"name": "prod-hv-7", "cpus": 8, "kernel": "6.1"},
        "interval": {"start_ms": now_ms() - 10_000, "end_ms": now_ms(), "length_ns": 10_000_000_000u64},
        "guests": []
    }))
    .unwrap();
    let valid = tickscope_server::ingest::validate(report, now_ms()).unwrap();
    db.store_lone_report(
        &valid,
        token_id,
        now_ms(),
        tickscope_server::ingest::samples::sample_spans,
    )
    .await
    .unwrap();
    let state = AppState::new(db.clone(), Options::default()).await.unwrap();
    let err = demo::start(&state).await.unwrap_err();
    assert!(err.to_string().contains("real host"), "{err}");
    assert_eq!(db.count_hosts_not_like("demo-hv-%").await.unwrap(), 1);
}
