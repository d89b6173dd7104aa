//! The fleet as the pages and the API show it: stored windows, analysed per host, ranked.

pub mod analysed;
pub mod change_records;
pub mod changes;
pub mod history;
pub mod index;
pub mod inputs;
pub mod listing;
pub mod lists;
pub mod live;
pub mod orderings;
pub mod plan;
pub mod published;
pub mod refresher;
pub mod state;
pub mod totals;
pub mod trend;

pub use analysed::{ACTIVE_WITHIN_MS, ANALYSIS_WINDOW_MS, AnalysedGuest, FACTS_MAX_AGE_MS, rank};
pub use changes::{AROUND_CHANGE_MS, SettledChanges, changes, last_changes};
pub use history::{History, WASTE_SO_FAR_BATCH, WASTE_SO_FAR_MS, WasteSoFar, waste_so_far_of};
pub use index::FleetIndex;
pub use inputs::{analyse_stored, guest};
pub use live::LiveFleet;
pub use plan::{group_key_of, plan, plan_groups, plan_guest};
pub use totals::{HostBaseline, HostTotals, Totals, host_totals, totals, with_host_rows};
