//! Roles, alert states, alert subjects and rule kinds: stored as the same TEXT as always
//! (`#[sqlx(rename_all)]` gives each variant its stored name), read back as the enum, so no
//! layer parses them again. A stored name that is none of the variants fails to decode: an
//! error, not a default.

use serde::{Deserialize, Serialize};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum TokenRole {
    /// Submits reports for a host.
    Agent,
    /// Reads the API.
    Viewer,
    /// A guest probe: submits its own guest's facts, nothing else.
    Guest,
}

impl TokenRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Agent => "agent",
            TokenRole::Viewer => "viewer",
            TokenRole::Guest => "guest",
        }
    }

    pub fn parse(text: &str) -> Option<TokenRole> {
        match text {
            "agent" => Some(TokenRole::Agent),
            "viewer" => Some(TokenRole::Viewer),
            "guest" => Some(TokenRole::Guest),
            _ => None,
        }
    }
}

/// What a dashboard user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum UserRole {
    /// Changes settings, tokens and users.
    Admin,
    /// Reads everything, changes nothing.
    Viewer,
}

impl UserRole {
    pub fn as_str(self) -> &'static str {
        match self {
            UserRole::Admin => "admin",
            UserRole::Viewer => "viewer",
        }
    }

    pub fn parse(text: &str) -> Option<UserRole> {
        match text {
            "admin" => Some(UserRole::Admin),
            "viewer" => Some(UserRole::Viewer),
            _ => None,
        }
    }
}

/// Where an alert stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum AlertState {
    /// The condition holds, not yet for the rule's duration.
    Pending,
    /// The condition held for the rule's duration: receivers were told.
    Firing,
    /// The condition cleared after the alert fired.
    Resolved,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }

    pub fn parse(text: &str) -> Option<AlertState> {
        match text {
            "pending" => Some(AlertState::Pending),
            "firing" => Some(AlertState::Firing),
            "resolved" => Some(AlertState::Resolved),
            _ => None,
        }
    }
}

/// What an alert is about: stored as `guest` or `host` in `alerts.subject`, and told apart as
/// this enum from there on, never by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Subject {
    Guest,
    Host,
}

impl Subject {
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Guest => "guest",
            Subject::Host => "host",
        }
    }

    pub fn parse(text: &str) -> Option<Subject> {
        match text {
            "guest" => Some(Subject::Guest),
            "host" => Some(Subject::Host),
            _ => None,
        }
    }
}

/// What a rule watches. Everything that differs between kinds is in [`RuleKind::spec`]: the
/// forms list [`RuleKind::ALL`], the validation reads the bounds, the pages the label and unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum RuleKind {
    /// An active guest's waste, in % of one host core (idle intervals only, see the analysis).
    GuestWaste,
    /// How long a host's agent has been silent, in seconds.
    HostSilent,
}

/// One rule kind, whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindSpec {
    /// Stored in `alert_rules.kind` (the sqlx name of the variant) and sent by the forms.
    pub name: &'static str,
    /// What its alerts are about.
    pub subject: Subject,
    /// What it watches, as the pages and the forms say it.
    pub label: &'static str,
    /// What its threshold is counted in, as the forms say it.
    pub measured_in: &'static str,
    /// Written after a threshold or an alert's value (also the `unit` of a plain JSON
    /// notification).
    pub unit: &'static str,
    pub threshold: ThresholdBounds,
}

/// The thresholds a rule of a kind may have, in the kind's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdBounds {
    pub min: f64,
    /// What the form offers before an admin types anything.
    pub default: f64,
    pub max: f64,
}

impl RuleKind {
    /// Every kind, in the order the forms offer them: the first is the form's default.
    pub const ALL: [RuleKind; 2] = [RuleKind::GuestWaste, RuleKind::HostSilent];

    /// The one place a kind is described.
    pub const fn spec(self) -> KindSpec {
        match self {
            RuleKind::GuestWaste => KindSpec {
                name: "guest_waste",
                subject: Subject::Guest,
                label: "guest waste while idle",
                measured_in: "% of a core",
                unit: "% of a core",
                // Up to 100 cores' worth: more than any guest can waste, short of a typo.
                threshold: ThresholdBounds {
                    min: 0.0,
                    default: 2.0,
                    max: 10_000.0,
                },
            },
            RuleKind::HostSilent => KindSpec {
                name: "host_silent",
                subject: Subject::Host,
                label: "agent silence",
                measured_in: "seconds",
                unit: "s silent",
                // Up to a week: a host silent for longer is gone, not late.
                threshold: ThresholdBounds {
                    min: 0.0,
                    default: 120.0,
                    max: 7.0 * 86_400.0,
                },
            },
        }
    }

    pub fn parse(text: &str) -> Option<RuleKind> {
        RuleKind::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// What the rule's alerts are about.
    pub fn subject(self) -> Subject {
        self.spec().subject
    }

    pub fn label(self) -> &'static str {
        self.spec().label
    }

    /// The unit of the rule's threshold and of an alert's value.
    pub fn unit(self) -> &'static str {
        self.spec().unit
    }

    pub fn threshold(self) -> ThresholdBounds {
        self.spec().threshold
    }
}

/// Each is shown as its stored name.
macro_rules! shown {
    ($($name:ident),*) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

/// Each is compared in templates and filters with its stored name. Not `Subject`: code tells
/// subjects apart by the enum, so that a misspelt name cannot compile.
macro_rules! named {
    ($($name:ident),*) => {$(
        impl PartialEq<&str> for $name {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }
    )*};
}

shown!(TokenRole, UserRole, AlertState, RuleKind, Subject);
named!(TokenRole, UserRole, AlertState, RuleKind);

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored names are the ones `as_str` gives (what the SQL and migrations write), and
    /// `parse` reads each back.
    #[test]
    fn each_variant_is_stored_under_its_name() {
        for role in [TokenRole::Agent, TokenRole::Viewer, TokenRole::Guest] {
            assert_eq!(TokenRole::parse(role.as_str()), Some(role));
        }
        for role in [UserRole::Admin, UserRole::Viewer] {
            assert_eq!(UserRole::parse(role.as_str()), Some(role));
        }
        for state in [
            AlertState::Pending,
            AlertState::Firing,
            AlertState::Resolved,
        ] {
            assert_eq!(AlertState::parse(state.as_str()), Some(state));
        }
        for kind in RuleKind::ALL {
            assert_eq!(RuleKind::parse(kind.as_str()), Some(kind));
        }
        for subject in [Subject::Guest, Subject::Host] {
            assert_eq!(Subject::parse(subject.as_str()), Some(subject));
        }
        let names = [
            (TokenRole::Agent.as_str(), "agent"),
            (TokenRole::Guest.as_str(), "guest"),
            (UserRole::Admin.as_str(), "admin"),
            (AlertState::Pending.as_str(), "pending"),
            (AlertState::Firing.as_str(), "firing"),
            (AlertState::Resolved.as_str(), "resolved"),
            (RuleKind::GuestWaste.as_str(), "guest_waste"),
            (RuleKind::HostSilent.as_str(), "host_silent"),
            (Subject::Guest.as_str(), "guest"),
            (Subject::Host.as_str(), "host"),
        ];
        for (got, stored) in names {
            assert_eq!(got, stored);
        }
    }

    /// What the table says of each kind, as stored and shown today: a change here is a change
    /// of stored data or of what receivers are sent (`unit` is in every plain JSON
    /// notification).
    #[test]
    fn each_kind_is_described_once() {
        let expected = [
            (
                RuleKind::GuestWaste,
                "guest_waste",
                Subject::Guest,
                "guest waste while idle",
                "% of a core",
            ),
            (
                RuleKind::HostSilent,
                "host_silent",
                Subject::Host,
                "agent silence",
                "s silent",
            ),
        ];
        assert_eq!(RuleKind::ALL.len(), expected.len());
        for (kind, name, subject, label, unit) in expected {
            assert!(RuleKind::ALL.contains(&kind), "{kind:?} is offered");
            assert_eq!(
                (kind.as_str(), kind.subject(), kind.label(), kind.unit()),
                (name, subject, label, unit)
            );
        }
        for (i, kind) in RuleKind::ALL.iter().enumerate() {
            for other in &RuleKind::ALL[i + 1..] {
                assert_ne!(kind.as_str(), other.as_str());
                assert_ne!(kind.label(), other.label(), "the form tells them apart");
            }
        }
    }

    /// The form's default is a threshold the validation accepts, inside the bounds, and no
    /// bound is below what the database allows (`threshold >= 0`).
    #[test]
    fn threshold_bounds_hold_their_default() {
        for kind in RuleKind::ALL {
            let b = kind.threshold();
            assert!(b.min >= 0.0, "{kind:?}: {b:?}");
            assert!(b.min < b.default && b.default < b.max, "{kind:?}: {b:?}");
            assert!(b.max.is_finite(), "{kind:?}: {b:?}");
        }
    }

    /// sqlx's derived name of each variant (what is written and read back) is the table's
    /// name: the two are spelt in different places, so they are checked against each other.
    #[tokio::test]
    async fn sqlx_stores_each_kind_and_subject_under_its_name() {
        let db = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        for kind in RuleKind::ALL {
            let stored: String = sqlx::query_scalar("SELECT ?")
                .bind(kind)
                .fetch_one(&db)
                .await
                .unwrap();
            assert_eq!(stored, kind.as_str());
            let read: RuleKind = sqlx::query_scalar("SELECT ?")
                .bind(kind.as_str())
                .fetch_one(&db)
                .await
                .unwrap();
            assert_eq!(read, kind);
        }
        for subject in [Subject::Guest, Subject::Host] {
            let stored: String = sqlx::query_scalar("SELECT ?")
                .bind(subject)
                .fetch_one(&db)
                .await
                .unwrap();
            assert_eq!(stored, subject.as_str());
            let read: Subject = sqlx::query_scalar("SELECT ?")
                .bind(subject.as_str())
                .fetch_one(&db)
                .await
                .unwrap();
            assert_eq!(read, subject);
        }
        let unknown: Result<RuleKind, _> =
            sqlx::query_scalar("SELECT 'cpu_hot'").fetch_one(&db).await;
        assert!(unknown.is_err(), "an unknown stored kind is an error");
    }
}
