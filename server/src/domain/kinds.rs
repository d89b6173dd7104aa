//! Roles, alert states and rule kinds: stored as the same TEXT as always (`#[sqlx(rename_all)]`
//! gives each variant its stored name), read back as the enum, so no layer parses them again.
//! A stored name that is none of the variants fails to decode: an error, not a default.

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

/// What a rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
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

/// Each is shown, and compared in templates and filters, as its stored name.
macro_rules! named {
    ($($name:ident),*) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }
    )*};
}

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
        for kind in [RuleKind::GuestWaste, RuleKind::HostSilent] {
            assert_eq!(RuleKind::parse(kind.as_str()), Some(kind));
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
        ];
        for (got, stored) in names {
            assert_eq!(got, stored);
        }
    }
}
