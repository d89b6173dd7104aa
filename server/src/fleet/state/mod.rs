//! The fleet's current state: every active guest's analysis inputs and verdict, held in memory,
//! and the ranking of them all, brought up to date as reports and facts are stored.
//!
//! A stored report updates its own guests' windows from what it stored and analyses its host's
//! guests again in memory ([`FleetState::apply`]): no read of the database. Nothing here is lost on
//! a restart: the raw windows are in the database and [`FleetState::load`] reads them. Kernel and
//! command-line changes are measured over the hour around them from the database, off the
//! report's path, by the refresher ([`FleetState::measure_changes`]).
//!
//! Two sides, so that no reader ever waits for work that grows with a host or the fleet:
//! - The writers' side (`Hosts`, behind a mutex only writers take: the intake, the
//!   refresher's bookkeeping, the retention's sweep) holds each host's inputs and analyses a
//!   host again, in O(n log n) of its guests.
//! - What readers see ([`Published`]) is replaced whole once a host's new verdicts are in: its
//!   maps are persistent (imbl), so the copy shares everything but what changed, and replacing a
//!   host's entries costs O(k log n) for its k guests. A reader takes the current copy under a
//!   lock held for one pointer's clone, and reads it for as long as it likes. The writers'
//!   draft is the copy published before the current one, brought up to date with the last
//!   batch's edits, when no reader holds it and it is not far behind (`turns`), so that a batch
//!   of reports does not copy and free every node it touches.
//!
//! `kept` holds the state and what changes it in memory; `from_db` what it reads from the
//! database, a follower's read of the hosts another server stored reports of included: a host
//! it holds is caught up with the samples of the reports stored since its last read, not read
//! whole again.

mod from_db;
mod kept;
mod turns;

pub use from_db::Reread;
pub use kept::{Applied, FIRST_FIGURES_WITHIN_MS, FleetState, Footprint, HeldBack};
