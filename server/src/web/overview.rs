//! `/`: the fleet at a glance: what fires, the totals, the worst wasters and hosts, and how
//! the guests divide by tick mode, kernel HZ and cause of idle burn.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};

use super::alerts::AlertLine;
use super::error::PageError;
use super::fleet_chart::{self, FleetTrendView};
use super::frame::Frame;
use super::guest_list::ListQuery;
use super::hosts::{self, HostLine};
use super::view::{self, GuestRow};
use crate::alerts::silences_in_force;
use crate::analysis::cause::Cause;
use crate::analysis::cost;
use crate::analysis::fleet_trend::{fleet_range, fleet_range_keys};
use crate::analysis::range::Range;
use crate::auth::PageUser;
use crate::error::AppError;
use crate::fleet::Totals;
use crate::fleet::index::FleetIndex;
use crate::fleet::listing::Facet;
use crate::fleet::trend;
use crate::state::AppState;

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
pub struct OverviewPage {
    frame: Frame,
    /// The oldest alerts firing now (at most [`OVERVIEW_TOP`]), and how many fire in all.
    firing: Vec<AlertLine>,
    firing_count: i64,
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
    /// Guests per cause of idle burn, most waste first; none for guests nothing is wrong with.
    causes: Vec<CauseShare>,
    /// The fleet over the chosen range.
    trend: FleetTrendView,
    generated: String,
}

#[derive(serde::Deserialize)]
pub struct OverviewQuery {
    range: Option<String>,
}

/// One cause's guests: how many, what they waste, and its bar's length in % of the fleet's
/// waste.
struct CauseShare {
    value: &'static str,
    label: &'static str,
    guests: usize,
    waste: String,
    link: String,
    bar_pct: f64,
}

/// The guests per cause (from the fleet's index: no guest is walked), most waste first, then
/// most guests, then in [`Cause::ALL`]'s order.
fn causes(index: &FleetIndex) -> Vec<CauseShare> {
    let mut shares: Vec<(Cause, usize, f64)> = index
        .values_with_waste(Facet::Cause)
        .filter_map(|(value, guests, wasted)| Some((Cause::parse(value)?, guests, wasted)))
        .collect();
    let fleet_waste: f64 = shares.iter().map(|(_, _, w)| w).sum();
    shares.sort_by(|a, b| b.2.total_cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
    shares
        .into_iter()
        .map(|(cause, guests, wasted)| CauseShare {
            value: cause.as_str(),
            label: cause.label(),
            guests,
            waste: view::pct(wasted),
            link: ListQuery::default().with(|q| q.filter.cause = cause.as_str().into()),
            bar_pct: if fleet_waste > 0.0 {
                100.0 * wasted / fleet_waste
            } else {
                0.0
            },
        })
        .collect()
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

/// The guests per value of a facet (from the fleet's index: no guest is walked), largest group
/// first, each with its list's link.
fn distribution<'a>(
    counts: impl Iterator<Item = (&'a str, usize)>,
    guests: usize,
    label: impl Fn(&str) -> String,
    link: impl Fn(&str) -> String,
) -> Vec<Share> {
    let mut rows: Vec<Share> = counts
        .map(|(value, count)| Share {
            label: label(value),
            link: link(value),
            bar_pct: 100.0 * count as f64 / guests.max(1) as f64,
            value: value.to_string(),
            count,
        })
        .collect();
    // By value last: groups of one size and label (none today) stay in a fixed order.
    rows.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.label.cmp(&b.label))
            .then_with(|| a.value.cmp(&b.value))
    });
    rows
}

pub async fn overview(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
    query: Result<Query<OverviewQuery>, QueryRejection>,
) -> Result<OverviewPage, PageError> {
    let range = match query.ok().and_then(|Query(q)| q.range) {
        None => Range::Day,
        Some(key) => fleet_range(&key).ok_or_else(|| {
            AppError::BadRequest(format!(
                "there is no range {key:?} for the fleet: use {}",
                fleet_range_keys()
            ))
        })?,
    };
    let now = state.clock.now_ms();
    // What the page counts is kept up to date as hosts are analysed: it costs what it shows,
    // not the fleet (issue 28).
    let published = state.fleet.published();
    let index = published.index(now);
    let totals = index.totals(&state.cost_model());
    let hosts = hosts::top_host_lines(&state, &index, now, OVERVIEW_TOP).await?;
    // Only guests still reporting count towards what was realised (kept as changes are
    // measured: no walk of them).
    let kept = published.realised(now);
    let realised = if kept.guests == 0 {
        String::new()
    } else {
        format!(
            "{} of a core saved so far, measured on {} guest(s) after their kernel or command line changed ({:.2} {} a year).",
            view::pct(kept.saved_cpu_pct),
            kept.guests,
            cost::money_per_year(kept.saved_cpu_pct, &state.cost_model()),
            state.cost_model().currency
        )
    };
    // The fleet's points are kept in memory: the chart costs the buckets it draws.
    let history = trend::history(&state.fleet, &state.trend, &state.db, range, now).await?;
    let silences = silences_in_force(&state.db, now).await?;
    let rules = state.db.alert_rules().await?;
    // Only what the page shows is read: at 30,000 guests, reading every open alert to show ten
    // took 13 % of the server's CPU with the overview read once a second (perf).
    let (oldest_firing, firing_count) = state.db.firing_alerts(OVERVIEW_TOP as i64).await?;
    let firing = oldest_firing
        .iter()
        .map(|a| AlertLine::new(a, &rules, &silences, now))
        .collect();
    Ok(OverviewPage {
        firing,
        firing_count,
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
        rows: published
            .ranked(now)
            .take(OVERVIEW_TOP)
            .map(|g| GuestRow::new(g))
            .collect(),
        modes: distribution(
            index.values(Facet::Mode),
            index.guests(),
            str::to_string,
            |m| ListQuery::default().with(|q| q.filter.mode = m.into()),
        ),
        hz: distribution(
            index.values(Facet::Hz),
            index.guests(),
            |hz| {
                if hz == "unknown" {
                    hz.to_string()
                } else {
                    format!("{hz} Hz")
                }
            },
            |hz| ListQuery::default().with(|q| q.filter.hz = hz.into()),
        ),
        causes: causes(&index),
        trend: fleet_chart::view(&history, range, now),
        all_hosts: hosts.all,
        blind_hosts: hosts.blind,
        host_rows: hosts.lines,
        generated: view::time(now),
    })
}
