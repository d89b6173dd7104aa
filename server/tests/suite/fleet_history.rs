//! The fleet over time: the point the server writes every five minutes, and
//! `GET /api/v1/fleet/history` and the overview's charts, which read those points.

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::common::{Reply, Server, fleet_report, manual_clock, server_with_clock};
use tickscope_server::analysis::fleet_trend::FleetPoint;
use tickscope_server::clock::Clock;
use tickscope_server::fleet::trend;
use tickscope_server::state::Options;

const MINUTE_MS: i64 = 60_000;

/// A point with these figures at `at_ms`.
fn point(
    at_ms: i64,
    guests: i64,
    ticking: i64,
    wasted_cpu_pct: f64,
    saved_cpu_pct: f64,
) -> FleetPoint {
    FleetPoint {
        at_ms,
        guests,
        ticking,
        wasted_cpu_pct,
        saved_cpu_pct,
        changes: 0,
    }
}

/// `GET /api/v1/fleet/history` with `query` (`?range=…` or empty), as `token`.
async fn get_history(s: &Server, query: &str, token: &str) -> Reply {
    s.call(
        Method::GET,
        &format!("/api/v1/fleet/history{query}"),
        Some(token),
        None,
    )
    .await
}

#[tokio::test]
async fn the_history_is_the_stored_points_averaged_per_bucket_for_every_range() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    let now = clock.now_ms();
    // Thirty-one days of points, every five minutes but for a gap of a day, with figures that
    // change from point to point.
    let mut at = FleetPoint::at(now - 31 * 24 * 60 * MINUTE_MS);
    let mut i = 0i64;
    while at <= now {
        let gap = (now - 3 * 24 * 60 * MINUTE_MS..now - 2 * 24 * 60 * MINUTE_MS).contains(&at);
        if !gap {
            let p = point(
                at,
                100 + i % 7,
                i % 13,
                (i % 50) as f64 * 1.5,
                (i % 11) as f64,
            );
            s.db.record_fleet_point(&p).await.unwrap();
        }
        at += 5 * MINUTE_MS;
        i += 1;
    }
    // Written twice in its five minutes, a point is the second one.
    let newest = FleetPoint::at(now);
    s.db.record_fleet_point(&point(newest, 3, 2, 250.0, 40.0))
        .await
        .unwrap();
    let stored = s.db.fleet_points(i64::MIN, i64::MAX).await.unwrap();
    assert_eq!(stored.last().unwrap().guests, 3);

    for (range, step_ms, buckets) in [
        ("24h", 15 * MINUTE_MS, 96),
        ("7d", 60 * MINUTE_MS, 168),
        ("30d", 360 * MINUTE_MS, 120),
    ] {
        let reply = get_history(&s, &format!("?range={range}"), &s.viewer_token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let body = reply.json();
        let (from, to) = (
            body["from_ms"].as_i64().unwrap(),
            body["to_ms"].as_i64().unwrap(),
        );
        assert_eq!(body["step_ms"].as_i64().unwrap(), step_ms, "{range}");
        assert!((from..to).contains(&now), "{range}");
        let got = body["buckets"].as_array().unwrap();
        assert_eq!(got.len(), buckets, "{range}");
        // Recomputed from the stored rows: each bucket the mean of the points in it.
        let mut expected: BTreeMap<i64, Vec<&FleetPoint>> = BTreeMap::new();
        for p in stored.iter().filter(|p| (from..to).contains(&p.at_ms)) {
            expected
                .entry(from + (p.at_ms - from) / step_ms * step_ms)
                .or_default()
                .push(p);
        }
        for b in got {
            let start = b["start_ms"].as_i64().unwrap();
            let points = expected.get(&start).map_or(&[][..], Vec::as_slice);
            assert_eq!(
                b["points"].as_u64().unwrap() as usize,
                points.len(),
                "{range} {start}"
            );
            if points.is_empty() {
                assert!(b["wasted_cores"].is_null(), "{range} {b}");
                continue;
            }
            let n = points.len() as f64;
            let mean = |f: fn(&FleetPoint) -> f64| points.iter().map(|p| f(p)).sum::<f64>() / n;
            for (field, value) in [
                ("wasted_cores", mean(|p| p.wasted_cpu_pct / 100.0)),
                ("ticking_guests", mean(|p| p.ticking as f64)),
                ("guests", mean(|p| p.guests as f64)),
                ("saved_cores", mean(|p| p.saved_cpu_pct / 100.0)),
            ] {
                let got = b[field].as_f64().unwrap();
                assert!(
                    (got - value).abs() < 1e-9,
                    "{range} {start} {field}: {got} != {value}"
                );
            }
        }
        // The day without points is a run of empty buckets in every range that covers it.
        if range != "24h" {
            assert!(got.iter().any(|b| b["points"] == 0), "{range}");
        }
    }

    // Only the ranges the points can fill, and a clear word otherwise.
    for bad in ["1h", "1y", ""] {
        let reply = get_history(&s, &format!("?range={bad}"), &s.viewer_token).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            reply.body.contains("range must be one of 24h, 7d, 30d"),
            "{}",
            reply.body
        );
    }
    let reply = get_history(&s, "", &s.agent_token).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_point_written_is_the_fleet_the_pages_count_and_shows_on_the_overview() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    for seq in 1..=7 {
        let reply = s
            .post_report(Some(&s.agent_token), &fleet_report(seq))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let now = clock.now_ms();
    let written = trend::record(&s.state.fleet, &s.db, now).await.unwrap();
    let totals = s
        .state
        .fleet
        .published()
        .index(now)
        .totals(&Default::default());
    assert_eq!(written.guests, 3);
    assert_eq!(written.guests as usize, totals.guests);
    assert_eq!(written.ticking as usize, totals.ticking);
    assert_eq!(written.ticking, 2);
    assert!((written.wasted_cpu_pct / 100.0 - totals.wasted_cores).abs() < 1e-9);
    assert!(written.wasted_cpu_pct > 0.0);

    let history = get_history(&s, "", &s.viewer_token).await.json();
    let filled: Vec<&Value> = history["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["points"] == 1)
        .collect();
    assert_eq!(filled.len(), 1, "{history}");
    assert_eq!(filled[0]["ticking_guests"], 2.0);

    // A point written later is read once what was read is a minute old.
    let later = now + 5 * MINUTE_MS;
    clock.set_ms(later);
    s.db.record_fleet_point(&point(FleetPoint::at(later), 3, 1, 1.0, 0.0))
        .await
        .unwrap();
    clock.set_ms(later + MINUTE_MS + 1);
    let history = get_history(&s, "", &s.viewer_token).await.json();
    let points: u64 = history["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["points"].as_u64().unwrap())
        .sum();
    assert_eq!(points, 2, "{history}");

    // The overview draws it, with its numbers as a table, for each range.
    let login = s.login("admin", "admin").await;
    for range in ["", "?range=24h", "?range=7d", "?range=30d"] {
        let page = s.page(&format!("/{range}"), &login).await;
        assert_eq!(page.status, StatusCode::OK, "{range}");
        assert!(page.body.contains("The fleet over time"), "{range}");
        assert_eq!(
            page.body.matches("id=\"trend0-title\"").count(),
            1,
            "{range}"
        );
        assert!(page.body.contains("Host cores wasted"), "{range}");
        assert!(
            page.body.contains("<summary>The numbers</summary>"),
            "{range}"
        );
    }
    let page = s.page("/?range=1h", &login).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("use 24h, 7d, 30d"), "{}", page.body);
}
