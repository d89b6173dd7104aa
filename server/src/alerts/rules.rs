//! The rules as the evaluation reads them: what each watches, over which guests or hosts, and
//! the silences in force.

use crate::analysis::alerting::{self, Silence};
use crate::db::{Db, HostRow, RuleRow, SilenceRow};
use crate::error::AppResult;
use crate::fleet::AnalysedGuest;

pub use crate::domain::RuleKind;
use crate::domain::Subject;

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
    /// A scope from its stored form; `None` for a combination that makes no sense: a hypervisor
    /// or a guest name narrows guests only, so a rule about hosts takes all or a host name.
    pub fn parse(kind: RuleKind, scope: &str, value: &str) -> Option<Scope> {
        let scope = match scope {
            "all" => Scope::All,
            "host" => Scope::Host(value.to_string()),
            "hypervisor" => Scope::Hypervisor(value.to_string()),
            "name" => Scope::Name(value.to_string()),
            _ => return None,
        };
        let fits = match (&scope, kind.subject()) {
            (Scope::All, _) => true,
            (Scope::Host(v) | Scope::Hypervisor(v) | Scope::Name(v), _) if v.is_empty() => false,
            (Scope::Host(_), _) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), Subject::Guest) => true,
            (Scope::Hypervisor(_) | Scope::Name(_), Subject::Host) => false,
        };
        fits.then_some(scope)
    }

    pub fn takes_guest(&self, g: &AnalysedGuest) -> bool {
        match self {
            Scope::All => true,
            Scope::Host(pattern) => alerting::matches(pattern, &g.host),
            Scope::Hypervisor(family) => g.hypervisor.eq_ignore_ascii_case(family),
            Scope::Name(pattern) => alerting::matches(pattern, &g.name),
        }
    }

    pub fn takes_host(&self, h: &HostRow) -> bool {
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
        let kind = row.settings.kind;
        let scope = Scope::parse(kind, &row.settings.scope, &row.settings.scope_value)?;
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
            rule_id: s.rule_id.map(|r| r.0),
            pattern: s.pattern.clone(),
            starts_ms: s.starts_ms,
            ends_ms: s.ends_ms,
        })
        .collect()
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
