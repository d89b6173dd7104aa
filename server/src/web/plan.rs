//! `/plan`: the kernel-upgrade plan, printable.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;

use super::change_view::{self, RecordedLine, TallyLine};
use super::error::PageError;
use super::frame::Frame;
use super::view::{self, Segment};
use std::collections::{BTreeMap, HashMap};

use crate::analysis::cause::Cause;
use crate::analysis::change_kind::{ChangeKind, Needs};
use crate::analysis::cost;
use crate::analysis::plan::PlanGroup;
use crate::auth::PageUser;
use crate::domain::GuestId;
use crate::fleet;
use crate::fleet::change_records::{self, Unsettled};
use crate::state::AppState;

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

/// The plan's groups of one cause (or of guests nothing is wrong with), with their sums.
struct CauseSection {
    /// The cause's name in addresses; empty for the guests with nothing to change.
    value: &'static str,
    label: &'static str,
    guests: usize,
    saving: String,
    saving_money: String,
    rows: Vec<PlanRow>,
}

#[derive(Template, WebTemplate)]
#[template(path = "plan.html")]
pub struct PlanPage {
    frame: Frame,
    generated: String,
    cost_basis: String,
    /// By cause, largest saving first; the guests with nothing to change last.
    sections: Vec<CauseSection>,
    total_saving: String,
    /// Each change's guests pending and made, with the realised saving against the projected.
    tallies: Vec<TallyLine>,
    /// How many changes are tallied, in words (the newest `RECORDS_TALLIED` at most).
    recorded_total: String,
    /// The latest recorded changes.
    recorded: Vec<RecordedLine>,
}

/// The recorded changes the plan page tallies, newest first, and lists.
const RECORDS_TALLIED: i64 = 10_000;
const RECORDS_LISTED: usize = 20;

/// The kernel-upgrade plan, printable.
pub async fn plan(
    State(state): State<AppState>,
    PageUser(user, session): PageUser,
) -> Result<PlanPage, PageError> {
    let now = state.clock.now_ms();
    let guests = state.fleet.ranked(now).await;
    let model = &state.cost_model();
    let money = |pct: f64| {
        format!(
            "{:.2} {}",
            cost::of_waste(pct, model).money_per_year,
            model.currency
        )
    };
    let records = state.db.change_records(None, RECORDS_TALLIED).await?;
    let capped = records.len() as i64 == RECORDS_TALLIED;
    // Those still in their hour are counted as made, not measured: the page reads no samples.
    let changes = change_records::outcomes(&state.db, records, now, Unsettled::Skip).await?;
    let tallies = change_view::tallies(&guests, &changes);
    let names: HashMap<GuestId, &str> = guests.iter().map(|g| (g.id, g.name.as_str())).collect();
    let recorded = changes
        .iter()
        .take(RECORDS_LISTED)
        .map(|c| {
            let name = names
                .get(&c.record.guest_id)
                .copied()
                .unwrap_or("(no longer reported)");
            RecordedLine::new(c, name, now)
        })
        .collect();
    let recorded_total = if capped {
        format!("Tallied from the newest {RECORDS_TALLIED} changes recorded.")
    } else {
        format!("{} change(s) recorded.", changes.len())
    };
    let groups = fleet::plan_groups(&guests);
    let total: f64 = groups.iter().map(|g| g.projected_saving_cpu_pct).sum();
    // The groups come largest saving first: each cause's keep that order.
    let mut by_cause: BTreeMap<Option<Cause>, Vec<PlanGroup>> = BTreeMap::new();
    for g in groups {
        by_cause.entry(g.cause).or_default().push(g);
    }
    let mut sections: Vec<(f64, CauseSection)> = by_cause
        .into_iter()
        .map(|(cause, groups)| {
            let saving: f64 = groups.iter().map(|g| g.projected_saving_cpu_pct).sum();
            let section = CauseSection {
                value: cause.map_or("", Cause::as_str),
                label: cause.map_or("Nothing to change", Cause::label),
                guests: groups.iter().map(|g| g.guests).sum(),
                saving: view::pct(saving),
                saving_money: money(saving),
                rows: groups.into_iter().map(|g| row(g, &money)).collect(),
            };
            (saving, section)
        })
        .collect();
    // Largest saving first; the guests with nothing to change (no cause) last.
    sections.sort_by(|(a, x), (b, y)| {
        x.value
            .is_empty()
            .cmp(&y.value.is_empty())
            .then(b.total_cmp(a))
            .then(x.label.cmp(y.label))
    });
    Ok(PlanPage {
        frame: Frame::new(&state, &user, &session).await?,
        generated: view::time(now),
        cost_basis: view::cost_basis(model),
        total_saving: format!("{} of a core, {} a year", view::pct(total), money(total)),
        sections: sections.into_iter().map(|(_, s)| s).collect(),
        tallies,
        recorded_total,
        recorded,
    })
}

/// One group's row.
fn row(g: PlanGroup, money: &impl Fn(f64) -> String) -> PlanRow {
    PlanRow {
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
    }
}
