//! Which statement files of `sql/` each backend compiles: one list, which `sqlite/` and
//! `postgres/` (and a third backend) each expand in their `mod.rs`.

/// The statement files of `sql/`, written once and compiled into each backend against its own
/// `dialect` (`#[path]` is read from the backend's folder). A new file there is named here
/// once; a backend without a `dialect` item a statement uses does not compile.
macro_rules! shared_statements {
    () => {
        #[path = "../sql/alerts.rs"]
        mod alerts;
        #[path = "../sql/facts.rs"]
        mod facts;
        #[path = "../sql/guests.rs"]
        mod guests;
        #[path = "../sql/history.rs"]
        mod history;
        #[path = "../sql/hosts.rs"]
        mod hosts;
        #[path = "../sql/probe.rs"]
        mod probe;
        #[path = "../sql/process_totals.rs"]
        mod process_totals;
        #[path = "../sql/reports.rs"]
        mod reports;
        #[path = "../sql/rollups.rs"]
        mod rollups;
        #[path = "../sql/settings.rs"]
        mod settings;
        #[cfg(feature = "test-support")]
        #[path = "../sql/test_support.rs"]
        mod test_support;
        #[path = "../sql/tokens.rs"]
        mod tokens;
        #[path = "../sql/users.rs"]
        mod users;
    };
}
pub(crate) use shared_statements;
