//! `/guests/{id}`: one guest, read and analysed; what it shows is built in `guest_view`.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};

use super::alerts::AlertLine;
use super::change_view::RecordedLine;
use super::chart::{self, Chart, Range};
use super::error::PageError;
use super::frame::Frame;
use super::guest_view::{GuestInputs, GuestPage};
use crate::alerts::silences_in_force;
use crate::analysis::history::Figures;
use crate::auth::PageUser;
use crate::db::FactsEventRow;
use crate::domain::{GuestId, Subject};
use crate::error::AppError;
use crate::fleet::change_records::{self, Unsettled};
use crate::fleet::{self, AnalysedGuest};
use crate::state::AppState;

/// The recorded changes a guest's page lists, newest first.
const RECORDS_SHOWN: i64 = 20;

#[derive(serde::Deserialize)]
pub struct GuestQuery {
    range: Option<String>,
}

pub async fn guest(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    id: Result<Path<i64>, PathRejection>,
    query: Result<Query<GuestQuery>, QueryRejection>,
) -> Result<GuestPage, PageError> {
    let not_found = || AppError::NotFound("There is no such guest.".into());
    let Path(id) = id.map_err(|_| not_found())?;
    let id = GuestId(id);
    let now = state.clock.now_ms();
    let guest = state.fleet.guest(id, now).await?.ok_or_else(not_found)?;
    let samples = state.db.recent_samples(id, 30).await?;
    let range = match query.ok().and_then(|Query(q)| q.range) {
        None => Range::Hour,
        Some(key) => Range::parse(&key).ok_or_else(|| {
            AppError::BadRequest(format!("there is no range {key:?}: use 1h, 24h, 7d or 30d"))
        })?,
    };
    // One read of the history serves the charts and the waste so far.
    let history = fleet::History::load(
        &state.db,
        id,
        now - range.length_ms().max(fleet::WASTE_SO_FAR_MS),
        now + 1,
    )
    .await?;
    let events = state.db.facts_history(id).await?;
    let charts = charts(&guest, &history, &events, range, now);
    let so_far = history.waste_so_far(&guest, now);
    let change = state.fleet.change(id, now).await?;
    let records = state.db.change_records(Some(id), RECORDS_SHOWN).await?;
    let recorded = change_records::outcomes(&state.db, records, now, Unsettled::Measure)
        .await?
        .iter()
        .map(|c| RecordedLine::new(c, &guest.name, now))
        .collect();
    let silences = silences_in_force(&state.db, now).await?;
    let rules = state.db.alert_rules().await?;
    let alerts = state
        .db
        .alerts_of(Subject::Guest, id.0)
        .await?
        .iter()
        .map(|a| AlertLine::new(a, &rules, &silences, now))
        .collect();
    let frame = Frame::new(&state, &user, &session).await?;
    Ok(GuestPage::build(
        frame,
        GuestInputs {
            guest,
            samples,
            events,
            so_far,
            change,
            recorded,
            alerts,
            charts,
            range,
            model: state.cost_model(),
            now_ms: now,
        },
    ))
}

/// The guest's history over `range` as four charts, with its kernel and command-line changes
/// marked on each.
fn charts(
    guest: &AnalysedGuest,
    history: &fleet::History,
    events: &[FactsEventRow],
    range: Range,
    now: i64,
) -> Vec<Chart> {
    let bucket_ms = range.bucket_ms();
    let from_ms = now - range.length_ms();
    let figures = history.figures(guest, from_ms, bucket_ms);
    // A change is a set of facts after the first from its source; its label says what changed.
    // One reboot seen by two sources (the probe at once, a guest agent later) is marked once.
    const SAME_CHANGE_MS: i64 = 15 * 60 * 1000;
    let mut marks: Vec<(i64, String)> = Vec::new();
    let mut oldest_first: Vec<&FactsEventRow> = events.iter().collect();
    oldest_first.sort_by_key(|e| e.first_received_ms);
    for (i, e) in oldest_first.iter().enumerate() {
        let Some(before) = oldest_first[..i]
            .iter()
            .rev()
            .find(|p| p.source == e.source)
        else {
            continue;
        };
        let label = if e.kernel_release != before.kernel_release {
            format!("kernel {}", e.kernel_release.as_deref().unwrap_or("?"))
        } else if e.cmdline != before.cmdline {
            "command line changed".to_string()
        } else {
            "kernel build changed".to_string()
        };
        let seen = marks
            .iter()
            .any(|(at, l)| *l == label && e.first_received_ms - at < SAME_CHANGE_MS);
        if !seen {
            marks.push((e.first_received_ms, label));
        }
    }
    // Every stretch of the range, with nothing where the guest did not report: a gap.
    let by_start: std::collections::HashMap<i64, Figures> = figures.into_iter().collect();
    let first = from_ms.div_euclid(bucket_ms) * bucket_ms;
    let series = |value: fn(&Figures) -> Option<f64>| -> Vec<(i64, Option<f64>)> {
        (first..=now)
            .step_by(bucket_ms as usize)
            // Each point sits mid-stretch, but not past now (the newest stretch is still going).
            .map(|start| {
                let at = (start + bucket_ms / 2).clamp(from_ms, now);
                (at, by_start.get(&start).and_then(value))
            })
            .collect()
    };
    vec![
        chart::layout(
            "Host CPU",
            "% of a core",
            range,
            from_ms,
            &series(|f| f.host_cpu_pct),
            &marks,
        ),
        chart::layout(
            "Wake-ups",
            "per vCPU per second",
            range,
            from_ms,
            &series(|f| f.wakeups_per_vcpu_s),
            &marks,
        ),
        chart::layout(
            "Wasted",
            "% of a core",
            range,
            from_ms,
            &series(|f| Some(f.wasted_cpu_pct)),
            &marks,
        ),
        chart::layout(
            "Idle",
            "% of the time",
            range,
            from_ms,
            &series(|f| f.idle_share.map(|s| s * 100.0)),
            &marks,
        ),
    ]
}
