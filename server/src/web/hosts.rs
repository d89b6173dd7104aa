//! `/hosts` and `/hosts/{id}`: each hypervisor host, its agent, its guests and its baselines.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};

use super::error::PageError;
use super::frame::Frame;
use super::view::{self, GuestRow};
use crate::auth::PageUser;
use std::collections::{HashMap, HashSet};

use crate::db::HostRow;
use crate::domain::HostId;
use crate::error::{AppError, AppResult};
use crate::fleet::listing::{GuestFilter, Order};
use crate::fleet::{FleetIndex, HostTotals};
use crate::state::AppState;
use tickscope_wire::BlindSpot;

/// A host whose agent has not reported for this long is shown as silent (agents report every
/// 10 s by default; a few missed reports can be a restart, minutes of them are not).
pub const SILENT_AFTER_MS: i64 = 2 * 60 * 1000;

pub struct HostLine {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) cpus: i64,
    pub(super) kernel: String,
    pub(super) agent_version: String,
    pub(super) halt_poll: String,
    pub(super) first_seen: String,
    pub(super) last_report: String,
    pub(super) silent: bool,
    /// Reports the agent's spool dropped unsent during outages; 0 when none.
    pub(super) dropped_reports: i64,
    pub(super) guests: usize,
    pub(super) ticking: usize,
    pub(super) waste: String,
    pub(super) money: String,
    pub(super) baselines: String,
    /// What its agent says it cannot see, with the fixes.
    pub(super) blind_spots: Vec<BlindSpot>,
}

impl HostLine {
    fn new(host: &HostRow, totals: Option<&HostTotals>, currency: &str, now: i64) -> HostLine {
        HostLine {
            id: host.id.0,
            name: host.name.clone(),
            cpus: host.cpus,
            kernel: host.kernel.clone(),
            agent_version: host.agent_version.clone(),
            halt_poll: host
                .kvm_halt_poll_ns
                .map_or("KVM not loaded".into(), |ns| format!("{ns} ns")),
            first_seen: view::time(host.first_seen_ms),
            last_report: format!(
                "{} ({})",
                view::ago(host.last_report_ms, now),
                view::time(host.last_report_ms)
            ),
            silent: now - host.last_report_ms > SILENT_AFTER_MS,
            dropped_reports: host.agent_dropped_reports,
            guests: totals.map_or(0, |t| t.guests),
            ticking: totals.map_or(0, |t| t.ticking),
            waste: view::pct(totals.map_or(0.0, |t| t.wasted_cpu_pct)),
            money: format!(
                "{:.0} {currency}",
                totals.map_or(0.0, |t| t.wasted_cost_per_year)
            ),
            baselines: totals.map_or("—".into(), view::baselines),
            blind_spots: host.blind_spots(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "hosts.html")]
pub struct HostsPage {
    frame: Frame,
    host_rows: Vec<HostLine>,
    silent: usize,
    blind: usize,
    generated: String,
}

/// The host lines a page shows, and counts over every host.
pub(super) struct HostLines {
    pub(super) lines: Vec<HostLine>,
    pub(super) all: usize,
    pub(super) silent: usize,
    pub(super) blind: usize,
}

/// Every host that ever reported with its active guests' totals: silent hosts first (they need
/// someone), the most recently silent first (the news; one silent for months is likely
/// retired), then by waste as the ranking does, then by name; only the first `limit` are
/// formatted. `/hosts` shows them all; the overview reads [`top_host_lines`].
pub(super) async fn host_lines(
    state: &AppState,
    index: &FleetIndex,
    now: i64,
    limit: usize,
) -> AppResult<HostLines> {
    let model = state.cost_model();
    let hosts = state.db.hosts().await?;
    let silent = |h: &HostRow| now - h.last_report_ms > SILENT_AFTER_MS;
    // Sorted by what the index keeps; only the lines shown are made.
    let wasted = |h: &HostRow| index.host_wasted_cpu_pct(h.id);
    let mut order: Vec<&HostRow> = hosts.iter().collect();
    order.sort_by(|a, b| match (silent(a), silent(b)) {
        (true, true) => b
            .last_report_ms
            .cmp(&a.last_report_ms)
            .then_with(|| a.name.cmp(&b.name)),
        (false, false) => wasted(b)
            .total_cmp(&wasted(a))
            .then_with(|| a.name.cmp(&b.name)),
        (a_silent, b_silent) => b_silent.cmp(&a_silent),
    });
    Ok(HostLines {
        all: hosts.len(),
        silent: hosts.iter().filter(|h| silent(h)).count(),
        blind: hosts.iter().filter(|h| h.is_blind()).count(),
        lines: order
            .into_iter()
            .take(limit)
            .map(|h| HostLine::new(h, index.host(h.id, &model).as_ref(), &model.currency, now))
            .collect(),
    })
}

/// The first `limit` of [`host_lines`], in the same order, reading the rows it shows rather
/// than every host's: the first silent ones (every host silent and blind is counted in the
/// database), then the reporting hosts with waste in the index's order, then those without by
/// name. Tested against [`host_lines`] (`server/tests/suite/fleet_state.rs`).
pub(super) async fn top_host_lines(
    state: &AppState,
    index: &FleetIndex,
    now: i64,
    limit: usize,
) -> AppResult<HostLines> {
    let model = state.cost_model();
    // `now - last_report_ms > SILENT_AFTER_MS`, as `host_lines` has it.
    let silent_before_ms = now - SILENT_AFTER_MS;
    let outstanding = state
        .db
        .hosts_outstanding(silent_before_ms, i64::try_from(limit).unwrap_or(i64::MAX))
        .await?;
    let wasted = |id: HostId| index.host_wasted_cpu_pct(id);
    // Every silent host when fewer than `limit` are; when more, they fill the lines and no
    // reporting host is looked at.
    let silent_ids: HashSet<HostId> = outstanding.silent_rows.iter().map(|h| h.id).collect();
    let mut shown: Vec<HostRow> = outstanding.silent_rows;
    // The reporting hosts with waste, most first: the index's order, a row read per line.
    let mut by_waste = index
        .host_ids_by_waste()
        .filter(|(id, _)| !silent_ids.contains(id));
    while shown.len() < limit {
        let ids: Vec<HostId> = by_waste
            .by_ref()
            .take_while(|(_, wasted)| *wasted > 0.0)
            .take(limit - shown.len())
            .map(|(id, _)| id)
            .collect();
        if ids.is_empty() {
            break;
        }
        let mut rows: HashMap<HostId, HostRow> = state
            .db
            .hosts_by_id(&ids)
            .await?
            .into_iter()
            .map(|h| (h.id, h))
            .collect();
        shown.extend(ids.iter().filter_map(|id| rows.remove(id)));
    }
    // Then those without waste, by name; they are few when any is shown (fewer than `limit`
    // hosts have waste), so the hosts with waste skipped on the way are too.
    let mut after: Option<String> = None;
    while shown.len() < limit {
        let chunk = state
            .db
            .reporting_hosts_by_name(silent_before_ms, after.as_deref(), limit as i64)
            .await?;
        let Some(last) = chunk.last() else {
            break;
        };
        after = Some(last.name.clone());
        let without: Vec<HostRow> = chunk
            .into_iter()
            .filter(|h| wasted(h.id) == 0.0)
            .take(limit - shown.len())
            .collect();
        shown.extend(without);
    }
    // Last, those the index counts less than none (no waste is negative; kept for the order).
    let mut below: Vec<HostId> = Vec::new();
    if shown.len() < limit {
        below = index
            .host_ids_by_waste()
            .filter(|(id, wasted)| *wasted < 0.0 && !silent_ids.contains(id))
            .take(limit - shown.len())
            .map(|(id, _)| id)
            .collect();
    }
    if !below.is_empty() {
        let mut rows: HashMap<HostId, HostRow> = state
            .db
            .hosts_by_id(&below)
            .await?
            .into_iter()
            .map(|h| (h.id, h))
            .collect();
        shown.extend(below.iter().filter_map(|id| rows.remove(id)));
    }
    Ok(HostLines {
        all: usize::try_from(outstanding.all).unwrap_or(0),
        silent: usize::try_from(outstanding.silent).unwrap_or(0),
        blind: usize::try_from(outstanding.blind).unwrap_or(0),
        lines: shown
            .iter()
            .map(|h| HostLine::new(h, index.host(h.id, &model).as_ref(), &model.currency, now))
            .collect(),
    })
}

pub async fn list(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<HostsPage, PageError> {
    let now = state.clock.now_ms();
    let published = state.fleet.published();
    let hosts = host_lines(&state, &published.index(now), now, usize::MAX).await?;
    Ok(HostsPage {
        frame: Frame::new(&state, &user, &session).await?,
        silent: hosts.silent,
        blind: hosts.blind,
        host_rows: hosts.lines,
        generated: view::time(now),
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "host.html")]
pub struct HostPage {
    frame: Frame,
    host: HostLine,
    guests: Vec<GuestRow>,
}

pub async fn one(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    id: Result<Path<i64>, PathRejection>,
) -> Result<HostPage, PageError> {
    let not_found = || AppError::NotFound("There is no such host.".into());
    let Path(id) = id.map_err(|_| not_found())?;
    let now = state.clock.now_ms();
    let host = state.db.host(HostId(id)).await?.ok_or_else(not_found)?;
    // The host's guests are one group of the kept order by host: the page walks them, not the
    // fleet.
    let published = state.fleet.published();
    let filter = GuestFilter {
        host: host.name.clone(),
        ..GuestFilter::default()
    };
    let guests: Vec<GuestRow> = published
        .list(Order::default(), &filter, None, now)
        .guests
        .filter(|g| g.host_id == host.id)
        .map(|g| GuestRow::new(g))
        .collect();
    let totals = published.index(now).host(host.id, &state.cost_model());
    Ok(HostPage {
        frame: Frame::new(&state, &user, &session).await?,
        host: HostLine::new(&host, totals.as_ref(), &state.cost_model().currency, now),
        guests,
    })
}
