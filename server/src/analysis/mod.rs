//! Turning measured figures into a verdict: pure functions, no I/O.
//!
//! Flow: a guest's [`Window`] of samples → [`Rates`] → a [`tick_mode::Classification`] → with the
//! host's learned [`waste::Baseline`], a [`waste::Waste`] → [`suggest::Suggestion`]s.
//! Everything here works from host-side evidence only (what the agent can see from outside the
//! guest) and says so in its evidence; guest-reported facts come later and will win over it.

pub mod alerting;
pub mod attribution;
pub mod boot_args;
pub mod cause;
pub mod change;
pub mod change_kind;
pub mod cost;
pub mod fleet_trend;
pub mod history;
pub mod idle;
pub mod kernel;
pub mod plan;
pub mod platform;
pub mod platform_rules;
pub mod range;
pub mod readiness;
pub mod suggest;
pub mod suggestion;
pub mod thread_rules;
pub mod tick_mode;
pub mod verdict;
pub mod waste;
pub mod window;

pub use verdict::{Verdict, analyse_host};
#[cfg(test)]
pub(crate) use window::test_window;
pub use window::{Interval, Rates, Span, Window};
