//! `/plan`: the kernel-upgrade plan, printable.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;

use super::error::PageError;
use super::frame::Frame;
use super::view::{self, Segment};
use crate::analysis::change_kind::{ChangeKind, Needs};
use crate::analysis::cost;
use crate::auth::PageUser;
use crate::fleet;
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
    let guests = state.fleet.ranked(now).await;
    let model = &state.cost_model();
    let money = |pct: f64| {
        format!(
            "{:.2} {}",
            cost::of_waste(pct, model).money_per_year,
            model.currency
        )
    };
    let groups = fleet::plan_groups(&guests);
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
