//! The edge where what agents and guests send becomes trusted data: a report is parsed once into
//! typed values (`report`), each guest's sample is decided from the stored running totals
//! (`samples`, `process_totals`), guest facts are checked (`facts`), and which host an agent token and
//! which guest a guest token may deliver for is decided (`host_binding`, `binding`).

pub mod binding;
pub mod facts;
pub mod host_binding;
pub mod host_guests;
pub mod interval;
pub mod process_totals;
mod report;
pub mod samples;

pub use interval::{MAX_CLOCK_SKEW_MS, MAX_INTERVAL_MS, MAX_REPLAY_AGE_MS, MIN_INTERVAL_MS};
pub use report::*;
