//! Page handlers: load, analyse, render.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::alerts::AlertLine;
use super::chart::{self, Chart, Range};
use super::frame::Frame;
use super::guest_list::{self, Column, ListQuery};
use super::hosts::{self, HostLine};
use super::view::{self, GuestRow, Segment};
use crate::alerts::silences_in_force;
use crate::analysis::change_kind::{ChangeKind, Needs};
use crate::analysis::cost;
use crate::analysis::history::Figures;
use crate::analysis::suggest::Suggestion;
use crate::auth::PageUser;
use crate::error::AppError;
use crate::fleet::{self, AnalysedGuest, Totals};
use crate::state::AppState;

/// An error shown as a page rather than as JSON.
pub struct PageError(AppError);

impl From<AppError> for PageError {
    fn from(e: AppError) -> Self {
        PageError(e)
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    frame: Frame,
    status: u16,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage {
            frame: Frame::default(),
            status: status.as_u16(),
            message: self.0.public_message(),
        };
        match page.render() {
            Ok(html) => (status, axum::response::Html(html)).into_response(),
            Err(_) => (status, self.0.public_message()).into_response(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    frame: Frame,
    /// Alerts firing now, oldest first.
    firing: Vec<AlertLine>,
    totals: Totals,
    wasted_cores: String,
    wasted_kwh: String,
    wasted_money: String,
    cost_basis: String,
    /// Savings measured after kernel or command-line changes; empty when none yet.
    realised: String,
    /// The top wasters; the whole list is on `/guests`.
    rows: Vec<GuestRow>,
    /// The most wasteful hosts (and any silent one); all of them are on `/hosts`.
    host_rows: Vec<HostLine>,
    all_hosts: usize,
    /// Hosts whose agents cannot see everything they look for.
    blind_hosts: usize,
    /// Guests per tick mode and per kernel HZ, largest group first.
    modes: Vec<Share>,
    hz: Vec<Share>,
    generated: String,
}

/// How many of the worst wasters the overview lists.
pub const OVERVIEW_TOP: usize = 10;

/// One group of guests in a distribution: its label, size, the list behind it, and its bar's
/// length in % (an SVG attribute: the CSP allows no inline styles).
struct Share {
    value: String,
    label: String,
    count: usize,
    link: String,
    bar_pct: f64,
}

/// How many guests have each value of `key`, largest group first, each with its list's link.
fn distribution(
    guests: &[Arc<AnalysedGuest>],
    key: impl Fn(&AnalysedGuest) -> String,
    label: impl Fn(&str) -> String,
    link: impl Fn(&str) -> String,
) -> Vec<Share> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for g in guests {
        *counts.entry(key(g)).or_default() += 1;
    }
    let mut rows: Vec<Share> = counts
        .into_iter()
        .map(|(value, count)| Share {
            label: label(&value),
            link: link(&value),
            bar_pct: 100.0 * count as f64 / guests.len().max(1) as f64,
            value,
            count,
        })
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.label.cmp(&b.label)));
    rows
}

pub async fn overview(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<OverviewPage, PageError> {
    let now = state.clock.now_ms();
    let guests = state.ranked(now).await;
    let totals = fleet::totals(&guests, &state.cost_model());
    let host_rows = hosts::host_lines(&state, &guests, now).await?;
    // Only guests still reporting count towards what was realised.
    let changes = state.changes(now).await;
    let saved: f64 = changes.values().map(|c| c.saved_cpu_pct).sum();
    let realised = if changes.is_empty() {
        String::new()
    } else {
        format!(
            "{} of a core saved so far, measured on {} guest(s) after their kernel or command line changed ({:.2} {} a year).",
            view::pct(saved),
            changes.len(),
            cost::money_per_year(saved, &state.cost_model()),
            state.cost_model().currency
        )
    };
    let silences = silences_in_force(&state.db, now).await?;
    let firing = state
        .db
        .open_alerts()
        .await?
        .iter()
        .filter(|a| a.state == "firing")
        .map(|a| AlertLine::new(a, &silences, now))
        .collect();
    Ok(OverviewPage {
        firing,
        frame: Frame::new(&state, &user, &session).await?,
        wasted_cores: format!("{:.2}", totals.wasted_cores),
        wasted_kwh: format!("{:.0}", totals.wasted_kwh_per_year),
        wasted_money: format!(
            "{:.0} {}",
            totals.wasted_cost_per_year, totals.cost_model.currency
        ),
        cost_basis: view::cost_basis(&state.cost_model()),
        realised,
        totals,
        rows: guests
            .iter()
            .take(OVERVIEW_TOP)
            .map(|g| GuestRow::new(g))
            .collect(),
        modes: distribution(
            &guests,
            |g| guest_list::mode(g).to_string(),
            str::to_string,
            |m| ListQuery::default().with(|q| q.mode = m.into()),
        ),
        hz: distribution(
            &guests,
            guest_list::hz,
            |hz| {
                if hz == "unknown" {
                    hz.to_string()
                } else {
                    format!("{hz} Hz")
                }
            },
            |hz| ListQuery::default().with(|q| q.hz = hz.into()),
        ),
        all_hosts: host_rows.len(),
        blind_hosts: host_rows
            .iter()
            .filter(|h| !h.blind_spots.is_empty())
            .count(),
        host_rows: host_rows.into_iter().take(OVERVIEW_TOP).collect(),
        generated: view::time(now),
    })
}

struct SuggestionView {
    title: Vec<Segment>,
    change: Vec<Segment>,
    why: Vec<Segment>,
    saving: String,
    confidence: &'static str,
    rule: &'static str,
}

impl SuggestionView {
    fn new(s: &Suggestion) -> Self {
        SuggestionView {
            title: view::segments(s.title),
            change: view::segments(&s.change),
            why: view::segments(&s.why),
            saving: s.saving_cpu_pct.map_or("unknown".into(), |p| {
                format!("about {} of a host core", view::pct(p))
            }),
            confidence: s.confidence.as_str(),
            rule: s.rule,
        }
    }
}

struct EventLine {
    first: String,
    last: String,
    source: String,
    kernel_release: String,
    cmdline: String,
}

struct SampleLine {
    end: String,
    length_s: String,
    host_cpu: String,
    wakeups: String,
    source: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "guest.html")]
pub struct GuestPage {
    frame: Frame,
    guest: Arc<AnalysedGuest>,
    row: GuestRow,
    last_seen: String,
    confidence: &'static str,
    /// Share of the window the guest idled, and how that was judged.
    idle_share: String,
    activity: String,
    /// The waste as energy and money per year, with the settings used.
    waste_cost: String,
    /// (period, waste accumulated over it) rows.
    waste_so_far: Vec<(&'static str, String)>,
    /// The history charts over `range`, and the ranges to choose from: (key, chosen).
    charts: Vec<Chart>,
    ranges: Vec<(&'static str, bool)>,
    /// Host CPU before and after the last kernel or command-line change; empty without one.
    change: Vec<(&'static str, String)>,
    evidence: Vec<Vec<Segment>>,
    suggestions: Vec<SuggestionView>,
    /// (label, value) rows of what the guest reported about its kernel; empty without facts.
    kernel: Vec<(&'static str, String)>,
    kernel_source: String,
    events: Vec<EventLine>,
    samples: Vec<SampleLine>,
    /// Every alert the guest has had, newest first.
    alerts: Vec<AlertLine>,
}

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
    let now = state.clock.now_ms();
    let guest = state.guest(id, now).await?.ok_or_else(not_found)?;
    let samples = state
        .db
        .recent_samples(id, 30)
        .await?
        .into_iter()
        .map(|s| SampleLine {
            end: view::time(s.end_ms),
            length_s: format!("{:.1}", s.length_ms / 1000.0),
            host_cpu: view::pct(100.0 * s.host_cpu_s * 1000.0 / s.length_ms.max(1.0)),
            wakeups: view::rate(
                s.vcpu_wakeups as f64 / (f64::from(s.vcpus.max(1)) * s.length_ms.max(1.0) / 1000.0),
            ),
            source: s.wakeups_source,
        })
        .collect();
    let suggestions = guest
        .verdict
        .suggestions
        .iter()
        .map(SuggestionView::new)
        .collect();
    let evidence = guest
        .verdict
        .classification
        .evidence
        .iter()
        .map(|e| view::segments(e))
        .collect();
    let kernel = guest.kernel.as_ref().map_or_else(Vec::new, |k| {
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
        vec![
            ("Kernel release", or_unknown(k.kernel_release.clone())),
            ("Distribution", or_unknown(k.distro.clone())),
            (
                "CONFIG_HZ",
                or_unknown(k.config_hz.map(|hz| hz.to_string())),
            ),
            ("NO_HZ built in", k.nohz.as_str().to_string()),
            (
                "Tick rate measured in the guest",
                or_unknown(k.measured_hz.map(|hz| format!("{hz:.1} Hz"))),
            ),
            (
                "Dynticks active",
                or_unknown(
                    k.dynticks_active
                        .map(|d| if d { "yes" } else { "no" }.to_string()),
                ),
            ),
            ("Timer parameters", {
                let flags = k.cmdline_flags();
                if flags.is_empty() {
                    "none".into()
                } else {
                    flags.join(" ")
                }
            }),
            ("Clocksource", or_unknown(k.clocksource.clone())),
            ("cpuidle driver", or_unknown(k.cpuidle_driver.clone())),
            (
                "Idle (guest's own count)",
                or_unknown(k.idle_fraction.map(|f| format!("{:.1} %", f * 100.0))),
            ),
        ]
    });
    let kernel_source = guest.kernel.as_ref().map_or_else(String::new, |k| {
        format!("from {}, received {:.0} s ago", k.source, k.age_s)
    });
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
    // Only a source that reported more than one set of facts has seen a change.
    let changed = events
        .iter()
        .any(|e| events.iter().filter(|o| o.source == e.source).count() > 1);
    let events = events
        .into_iter()
        .filter(|_| changed)
        .map(|e| EventLine {
            first: view::time(e.first_received_ms),
            last: view::time(e.received_ms),
            source: e.source,
            kernel_release: e.kernel_release.unwrap_or_default(),
            cmdline: e.cmdline.unwrap_or_default(),
        })
        .collect();
    let yearly = cost::of_waste(guest.wasted_cpu_pct(), &state.cost_model());
    let waste_cost = format!(
        "If it goes on: {:.1} core-hours a day, {:.1} kWh and {:.2} {} a year ({}).",
        yearly.core_hours_per_day,
        yearly.kwh_per_year,
        yearly.money_per_year,
        state.cost_model().currency,
        view::cost_basis(&state.cost_model())
    );
    let so_far = history.waste_so_far(&guest, now);
    let model = &state.cost_model();
    let waste_so_far = [
        ("Last 24 hours", so_far.last_24h),
        ("Last 7 days", so_far.last_7d),
    ]
    .into_iter()
    .map(|(label, a)| {
        let (kwh, money) = cost::of_core_hours(a.wasted_core_hours, model);
        let idle = if a.measured_hours > 0.0 {
            format!(
                ", idle {:.0} % of it",
                100.0 * a.idle_hours / a.measured_hours
            )
        } else {
            String::new()
        };
        (
            label,
            format!(
                "{:.2} core-hours, {:.2} kWh, {:.2} {} (over {:.1} h measured{idle})",
                a.wasted_core_hours, kwh, money, model.currency, a.measured_hours
            ),
        )
    })
    .collect();
    let change = fleet::changes(&state.db, Some(id), now)
        .await?
        .remove(&id)
        .map_or_else(Vec::new, |c| {
            vec![
                ("Changed", view::time(c.at_ms)),
                (
                    "Host CPU while idle, before → after",
                    format!(
                        "{} → {}",
                        view::pct(c.cpu_before_pct),
                        view::pct(c.cpu_after_pct)
                    ),
                ),
                (
                    "Wake-ups per vCPU per second",
                    format!(
                        "{} → {}",
                        view::rate(c.wakeups_before),
                        view::rate(c.wakeups_after)
                    ),
                ),
                (
                    "Saved",
                    format!(
                        "{} of a host core (idle {:.0} % of the time since)",
                        view::pct(c.saved_cpu_pct),
                        c.idle_share_after * 100.0
                    ),
                ),
            ]
        });
    let silences = silences_in_force(&state.db, now).await?;
    let alerts = state
        .db
        .alerts_of("guest", id)
        .await?
        .iter()
        .map(|a| AlertLine::new(a, &silences, now))
        .collect();
    Ok(GuestPage {
        alerts,
        change,
        waste_cost,
        waste_so_far,
        charts,
        ranges: Range::ALL
            .into_iter()
            .map(|r| (r.key(), r == range))
            .collect(),
        kernel,
        kernel_source,
        events,
        frame: Frame::new(&state, &user, &session).await?,
        idle_share: guest
            .verdict
            .activity
            .idle_share()
            .map_or("–".into(), |share| format!("{:.0} %", share * 100.0)),
        activity: guest.verdict.activity.describe(),
        row: GuestRow::new(&guest),
        last_seen: format!(
            "{} ({})",
            view::time(guest.last_seen_ms),
            view::ago(guest.last_seen_ms, now)
        ),
        confidence: guest.verdict.classification.confidence.as_str(),
        evidence,
        suggestions,
        samples,
        guest,
    })
}

/// For requests to paths that do not exist: JSON under `/api/`, a page elsewhere.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let error = AppError::NotFound(format!("There is nothing at {}.", uri.path()));
    if uri.path().starts_with("/api/") {
        error.into_response()
    } else {
        PageError(error).into_response()
    }
}

struct PlanRow {
    /// The group's key, as the exports have it.
    key: String,
    distro: String,
    kernel_release: String,
    tick_mode: &'static str,
    guests: usize,
    waste: String,
    change: Vec<Segment>,
    change_guests: usize,
    /// What the change takes, in words.
    needs: &'static str,
    saving: String,
    saving_money: String,
}

/// What a change takes, as the plan page says it.
fn needs_in_words(kind: Option<ChangeKind>) -> &'static str {
    match kind.map(ChangeKind::needs) {
        None => "",
        Some(Needs::NoReboot) => "no reboot",
        Some(Needs::Reboot) => "a reboot",
        Some(Needs::NewKernel) => "a new kernel",
        Some(Needs::VmRestart) => "a VM restart",
        Some(Needs::Unknown) => "a look first",
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "plan.html")]
pub struct PlanPage {
    frame: Frame,
    generated: String,
    cost_basis: String,
    rows: Vec<PlanRow>,
    total_saving: String,
}

/// The kernel-upgrade plan, printable.
pub async fn plan(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<PlanPage, PageError> {
    let now = state.clock.now_ms();
    let guests = state.ranked(now).await;
    let model = &state.cost_model();
    let money = |pct: f64| {
        format!(
            "{:.2} {}",
            cost::of_waste(pct, model).money_per_year,
            model.currency
        )
    };
    let groups = fleet::plan(&guests);
    let total: f64 = groups.iter().map(|g| g.projected_saving_cpu_pct).sum();
    Ok(PlanPage {
        frame: Frame::new(&state, &user, &session).await?,
        generated: view::time(now),
        cost_basis: view::cost_basis(model),
        total_saving: format!("{} of a core, {} a year", view::pct(total), money(total)),
        rows: groups
            .into_iter()
            .map(|g| PlanRow {
                waste: view::pct(g.wasted_cpu_pct),
                saving: view::pct(g.projected_saving_cpu_pct),
                saving_money: money(g.projected_saving_cpu_pct),
                change: view::segments(&g.change),
                needs: needs_in_words(g.change_kind),
                key: g.key,
                distro: g.distro,
                kernel_release: g.kernel_release,
                tick_mode: g.tick_mode,
                guests: g.guests,
                change_guests: g.change_guests,
            })
            .collect(),
    })
}

/// A column header of the guest list: its label, the link that sorts by it, and whether (and
/// which way) the list is sorted by it now, for `aria-sort`.
struct SortHeader {
    label: &'static str,
    link: String,
    aria_sort: &'static str,
    num: bool,
}

/// One row of the guest list.
struct ListRow {
    guest: GuestRow,
    uuid: String,
    distro: String,
    kernel: String,
}

/// A filter's drop-down: its parameter, label, choices and the chosen one.
struct Filter {
    param: &'static str,
    label: &'static str,
    choices: Vec<String>,
    chosen: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "guests.html")]
pub struct GuestsPage {
    frame: Frame,
    search: String,
    filters: Vec<Filter>,
    sort: String,
    dir: String,
    headers: Vec<SortHeader>,
    rows: Vec<ListRow>,
    matching: usize,
    total: usize,
    page: usize,
    pages: usize,
    previous: String,
    next: String,
    clear: String,
}

/// `/guests`: every active guest, filtered, searched, sorted and paged by the query string.
pub async fn guests(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<GuestsPage, PageError> {
    let Query(query) = query
        .map_err(|e| AppError::BadRequest(format!("this view's address is not valid: {e}")))?;
    let guests = state.ranked(state.clock.now_ms()).await;
    let filter = |param, label, chosen: &str, field: fn(&AnalysedGuest) -> String| {
        let mut choices = guest_list::choices(&guests, field);
        // A value no active guest has (a silent host's) still shows as the one applied.
        if !chosen.is_empty() && !choices.iter().any(|c| c == chosen) {
            choices.insert(0, chosen.to_string());
        }
        Filter {
            param,
            label,
            choices,
            chosen: chosen.to_string(),
        }
    };
    let filters = vec![
        filter("host", "Host", &query.host, |g| g.host.clone()),
        filter("hypervisor", "Hypervisor", &query.hypervisor, |g| {
            g.hypervisor.clone()
        }),
        {
            let mut modes = filter("mode", "Tick mode", &query.mode, |g| {
                guest_list::mode(g).to_string()
            });
            modes.choices.insert(0, guest_list::WASTEFUL.to_string());
            modes
        },
        filter("hz", "Kernel HZ", &query.hz, guest_list::hz),
        filter("distro", "Distribution", &query.distro, guest_list::distro),
        filter("kernel", "Kernel", &query.kernel, guest_list::kernel),
    ];
    let labels = [
        (Column::Name, "Guest"),
        (Column::Host, "Host"),
        (Column::Hypervisor, "Hypervisor"),
        (Column::Vcpus, "vCPUs"),
        (Column::Cpu, "Host CPU"),
        (Column::Wakeups, "Wake-ups /vCPU/s"),
        (Column::Mode, "Tick mode"),
        (Column::Waste, "Wasted"),
        (Column::Distro, "Distribution"),
        (Column::Kernel, "Kernel"),
    ];
    let headers = labels
        .into_iter()
        .map(|(column, label)| SortHeader {
            label,
            link: query.sort_link(column),
            aria_sort: match (query.column() == column, query.descending()) {
                (false, _) => "none",
                (true, true) => "descending",
                (true, false) => "ascending",
            },
            num: matches!(
                column,
                Column::Vcpus | Column::Cpu | Column::Wakeups | Column::Waste
            ),
        })
        .collect();
    let listed = guest_list::page(&guests, &query);
    let rows = listed
        .rows
        .iter()
        .map(|g| ListRow {
            guest: GuestRow::new(g),
            uuid: g.uuid.clone().unwrap_or_default(),
            distro: guest_list::distro(g),
            kernel: guest_list::kernel(g),
        })
        .collect();
    let (page, pages) = (listed.page, listed.pages);
    Ok(GuestsPage {
        frame: Frame::new(&state, &user, &session).await?,
        search: query.q.clone(),
        filters,
        sort: query.sort.clone(),
        dir: query.dir.clone(),
        headers,
        rows,
        matching: listed.matching,
        total: guests.len(),
        page,
        pages,
        previous: if page > 1 {
            query.with(|q| q.page = page - 1)
        } else {
            String::new()
        },
        next: if page < pages {
            query.with(|q| q.page = page + 1)
        } else {
            String::new()
        },
        clear: ListQuery::default().with(|_| {}),
    })
}

/// The guest's history over `range` as four charts, with its kernel and command-line changes
/// marked on each.
fn charts(
    guest: &AnalysedGuest,
    history: &fleet::History,
    events: &[crate::db::FactsEventRow],
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
    let mut oldest_first: Vec<&crate::db::FactsEventRow> = events.iter().collect();
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
