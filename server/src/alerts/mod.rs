//! Alerting: rules evaluated on a timer against the fleet's current state, alert states kept in
//! the database, notifications delivered from a database outbox to webhook receivers, and the
//! alerts sent into Alertmanager.
//!
//! Flow: [`evaluate`] reads the rules, the open alerts, the silences and the receivers, steps
//! each (rule, subject) with [`crate::analysis::alerting::step`], and writes the new states together with the
//! notifications they send in one transaction. [`deliver_due`] posts what the outbox holds,
//! grouped per receiver as Alertmanager groups, and retries what fails for a reason that may
//! pass. [`alertmanager`] sends the firing and recently resolved alerts to each Alertmanager on
//! a cadence.

pub mod alertmanager;
pub mod client;
pub mod context;
mod evaluate;
mod jobs;
pub mod labels;
mod measure;
pub mod rules;
pub mod webhook;

pub use context::AlertContext;
pub use evaluate::{Evaluated, evaluate, figures_refresh};
pub use jobs::spawn;
pub use rules::{Rule, RuleKind, Scope, as_silences, silences_in_force};
pub use webhook::{MAX_ATTEMPTS, deliver_due, retry_delay_ms};
