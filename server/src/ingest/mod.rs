//! The edge where what agents and guests send becomes trusted data: a report is parsed once into
//! typed values (`report`), each guest's sample is decided from the stored running totals
//! (`samples`, `totals`), and guest facts are checked (`facts`).

pub mod binding;
pub mod facts;
pub mod host_guests;
pub mod interval;
mod report;
pub mod samples;
pub mod totals;

pub use interval::{MAX_CLOCK_SKEW_MS, MAX_INTERVAL_MS, MAX_REPLAY_AGE_MS, MIN_INTERVAL_MS};
pub use report::*;
