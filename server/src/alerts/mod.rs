//! Alerting: rules evaluated on a timer against the fleet's current state, alert states kept in
//! the database, notifications delivered from a database outbox to webhook receivers, and the
//! alerts sent into Alertmanager.
//!
//! Flow: [`evaluate`] reads the rules, the open alerts, the silences and the receivers, steps
//! each (rule, subject) with [`alerting::step`], and writes the new states together with the
//! notifications they send in one transaction. [`deliver_due`] posts what the outbox holds,
//! grouped per receiver as Alertmanager groups, and retries what fails for a reason that may
//! pass. [`alertmanager`] sends the firing and recently resolved alerts to each Alertmanager on
//! a cadence.

pub mod alertmanager;
pub mod client;
mod evaluate;
pub mod labels;
mod measure;
pub mod webhook;

use std::time::Duration;

pub use evaluate::{Evaluated, evaluate};
pub use webhook::{MAX_ATTEMPTS, deliver_due, retry_delay_ms};

use crate::analysis::alerting::{self, Silence};
use crate::db::{Db, HostRow, RuleRow, SilenceRow};
use crate::error::AppResult;
use crate::fleet::AnalysedGuest;
use crate::state::AppState;

/// What a rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// An active guest's waste, in % of one host core (idle intervals only, see the analysis).
    GuestWaste,
    /// How long a host's agent has been silent, in seconds.
    HostSilent,
}

impl RuleKind {
    pub fn parse(text: &str) -> Option<RuleKind> {
        match text {
            "guest_waste" => Some(RuleKind::GuestWaste),
            "host_silent" => Some(RuleKind::HostSilent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "guest_waste",
            RuleKind::HostSilent => "host_silent",
        }
    }

    /// The kind of rule that watches a stored alert's subject (`guest` or `host`).
    pub fn of_subject(subject: &str) -> RuleKind {
        if subject == "host" {
            RuleKind::HostSilent
        } else {
            RuleKind::GuestWaste
        }
    }

    /// What the rule's alerts are about, as stored.
    pub fn subject(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "guest",
            RuleKind::HostSilent => "host",
        }
    }

    /// The unit of the rule's threshold and of an alert's value.
    pub fn unit(self) -> &'static str {
        match self {
            RuleKind::GuestWaste => "% of a core",
            RuleKind::HostSilent => "s silent",
        }
    }
}

/// Which subjects a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// Hosts whose name matches (a `*` pattern).
    Host(String),
    /// Guests of one hypervisor family.
    Hypervisor(String),
    /// Guests whose name matches (a `*` pattern).
    Name(String),
}

impl Scope {
    /// A scope from its stored form; `None` for a combination that makes no sense.
    pub fn parse(kind: RuleKind, scope: &str, value: &str) -> Option<Scope> {
        let scope = match scope {
            "all" => Scope::All,
            "host" => Scope::Host(value.to_string()),
            "hypervisor" => Scope::Hypervisor(value.to_string()),
            "name" => Scope::Name(value.to_string()),
            _ => return None,
        };
        let fits = match (&scope, kind) {
            (Scope::All, _) => true,
            (Scope::Host(v) | Scope::Hypervisor(v) | Scope::Name(v), _) if v.is_empty() => false,
            (Scope::Host(_), _) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), RuleKind::GuestWaste) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), RuleKind::HostSilent) => false,
        };
        fits.then_some(scope)
    }

    fn takes_guest(&self, g: &AnalysedGuest) -> bool {
        match self {
            Scope::All => true,
            Scope::Host(pattern) => alerting::matches(pattern, &g.host),
            Scope::Hypervisor(family) => g.hypervisor.eq_ignore_ascii_case(family),
            Scope::Name(pattern) => alerting::matches(pattern, &g.name),
        }
    }

    fn takes_host(&self, h: &HostRow) -> bool {
        match self {
            Scope::All => true,
            Scope::Host(pattern) => alerting::matches(pattern, &h.name),
            Scope::Hypervisor(_) | Scope::Name(_) => false,
        }
    }
}

/// A rule, parsed.
#[derive(Debug, Clone)]
pub struct Rule {
    pub row: RuleRow,
    pub kind: RuleKind,
    pub scope: Scope,
}

impl Rule {
    pub fn parse(row: RuleRow) -> Option<Rule> {
        let kind = RuleKind::parse(&row.kind)?;
        let scope = Scope::parse(kind, &row.scope, &row.scope_value)?;
        Some(Rule { row, kind, scope })
    }
}

/// The silences that have not ended by `now_ms`, as the evaluation and the pages match them.
pub async fn silences_in_force(db: &Db, now_ms: i64) -> AppResult<Vec<Silence>> {
    Ok(as_silences(&db.silences(now_ms).await?))
}

/// Stored silences as the evaluation matches them.
pub fn as_silences(rows: &[SilenceRow]) -> Vec<Silence> {
    rows.iter()
        .map(|s| Silence {
            rule_id: s.rule_id,
            pattern: s.pattern.clone(),
            starts_ms: s.starts_ms,
            ends_ms: s.ends_ms,
        })
        .collect()
}

/// Runs the evaluation every `every`, the webhook delivery whenever something is due, and one
/// sender per Alertmanager, until the server stops.
pub fn spawn(state: AppState, every: Duration, alertmanagers: alertmanager::AlertmanagerOptions) {
    let (changed, changes) = tokio::sync::watch::channel(0_u64);
    if !alertmanagers.targets.is_empty() {
        alertmanager::spawn(state.clone(), alertmanagers, every, changes);
    }
    let evaluating = state.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            match evaluate(&evaluating, evaluating.clock.now_ms()).await {
                // Alertmanager hears of a change at once, not at the next resend.
                Ok(e) if e.transitions > 0 => changed.send_modify(|n| *n += 1),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "alert rules could not be evaluated"),
            }
        }
    });
    tokio::spawn(async move {
        loop {
            if let Err(e) = deliver_due(&state).await {
                tracing::warn!(error = %e, "notifications could not be delivered");
            }
            // Sleep until the next group is due (at most a minute), or until an evaluation
            // writes a new notification.
            let wait_ms = match webhook::next_delivery_ms(&state).await {
                Ok(Some(at)) => (at - state.clock.now_ms()).clamp(50, 60_000),
                _ => 60_000,
            };
            let _ = tokio::time::timeout(
                Duration::from_millis(wait_ms as u64),
                state.notifier.notified(),
            )
            .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_fit_their_rule_kind() {
        use RuleKind::*;
        let cases = [
            (GuestWaste, "all", "", Some(Scope::All)),
            (GuestWaste, "host", "hv-*", Some(Scope::Host("hv-*".into()))),
            (
                GuestWaste,
                "hypervisor",
                "qemu",
                Some(Scope::Hypervisor("qemu".into())),
            ),
            (GuestWaste, "name", "", None),
            (HostSilent, "host", "hv-1", Some(Scope::Host("hv-1".into()))),
            (HostSilent, "name", "web-*", None),
            (HostSilent, "hypervisor", "qemu", None),
            (GuestWaste, "everything", "", None),
        ];
        for (kind, scope, value, expected) in cases {
            assert_eq!(
                Scope::parse(kind, scope, value),
                expected,
                "{scope} {value}"
            );
        }
    }
}
