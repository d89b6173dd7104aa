//! `/guests`: every active guest, filtered, searched, sorted and paged by the query string
//! (the query itself is read and applied in `guest_list`).

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};

use super::error::PageError;
use super::frame::Frame;
use super::guest_list::{self, Column, ListQuery};
use super::view::GuestRow;
use crate::analysis::cause::Cause;
use crate::auth::PageUser;
use crate::error::AppError;
use crate::fleet::listing::Facet;
use crate::state::AppState;

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
    /// Each choice's value and its text.
    choices: Vec<(String, String)>,
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
    let now = state.clock.now_ms();
    let published = state.fleet.published();
    let index = published.index(now);
    // A filter's choices are the values some active guest has, kept counted: no guest is
    // walked for them.
    let filter = |facet: Facet, param, label| {
        let chosen = query.filter.wanted(facet);
        let text = |value: &str| match facet {
            Facet::Cause => Cause::parse(value).map_or(value.to_string(), |c| c.label().into()),
            _ => value.to_string(),
        };
        let mut choices: Vec<(String, String)> = index
            .values(facet)
            .map(|(value, _)| value)
            .filter(|value| !value.is_empty())
            .map(|value| (value.to_string(), text(value)))
            .collect();
        // A value no active guest has (a silent host's) still shows as the one applied.
        if !chosen.is_empty() && !choices.iter().any(|(c, _)| c == chosen) {
            choices.insert(0, (chosen.to_string(), text(chosen)));
        }
        Filter {
            param,
            label,
            choices,
            chosen: chosen.to_string(),
        }
    };
    let filters = vec![
        filter(Facet::Host, "host", "Host"),
        filter(Facet::Hypervisor, "hypervisor", "Hypervisor"),
        {
            let mut modes = filter(Facet::Mode, "mode", "Tick mode");
            let wasteful = guest_list::WASTEFUL.to_string();
            modes.choices.insert(0, (wasteful.clone(), wasteful));
            modes
        },
        filter(Facet::Cause, "cause", "Cause"),
        filter(Facet::Hz, "hz", "Kernel HZ"),
        filter(Facet::Distro, "distro", "Distribution"),
        filter(Facet::Kernel, "kernel", "Kernel"),
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
        (Column::Cause, "Cause"),
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
    let listed = guest_list::page(&published, &query, now);
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
        search: query.filter.q.clone(),
        filters,
        sort: query.sort.clone(),
        dir: query.dir.clone(),
        headers,
        rows,
        matching: listed.matching,
        total: index.guests(),
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
