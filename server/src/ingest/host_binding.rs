//! Which host an agent token may report for: the decision, apart from storage (which reads the
//! token's binding and whether the host is taken inside the report's transaction, calls
//! [`may_report`], and binds the token to the host when its first report is stored).
//!
//! A token made with `--host` (or on the settings page with a host) reports for that host only.
//! A token made without one takes the host it first reports for, unless another token has it:
//! one that reported for it (revoked or not) or one an admin made for it. Only an admin hands a
//! host to another token, by making a token bound to it.

/// What storage knows of an agent token and the host a report names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostClaim {
    /// The token is bound to this host.
    Bound(String),
    /// The token has no host yet; `host_taken`: another agent token is bound to the report's
    /// host, or the host has reported before (with another token, since this one has none).
    Unbound { host_taken: bool },
}

/// Whether a report for `host` may be stored under `claim`; the refusal says why and what to do.
pub fn may_report(claim: &HostClaim, host: &str) -> Result<(), String> {
    match claim {
        HostClaim::Bound(bound) if bound != host => Err(format!(
            "this agent token reports for host {bound:?}, not {host:?}; give each host its own token"
        )),
        HostClaim::Bound(_) | HostClaim::Unbound { host_taken: false } => Ok(()),
        HostClaim::Unbound { host_taken: true } => Err(format!(
            "host {host:?} reports with another agent token; to give it this one, an admin makes a token bound to it (tickscope-server token add NAME --role agent --host {host}, or on the settings page)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reports_for_its_own_host_or_a_free_one_only() {
        let bound = |h: &str| HostClaim::Bound(h.to_string());
        let free = HostClaim::Unbound { host_taken: false };
        let taken = HostClaim::Unbound { host_taken: true };
        for (claim, host, refused_with) in [
            (bound("hv1"), "hv1", None),
            (
                bound("hv1"),
                "hv2",
                Some("reports for host \"hv1\", not \"hv2\""),
            ),
            // Names compare exactly: another case is another host.
            (
                bound("hv1"),
                "HV1",
                Some("reports for host \"hv1\", not \"HV1\""),
            ),
            (free, "hv3", None),
            (taken, "hv4", Some("--role agent --host hv4")),
        ] {
            match (may_report(&claim, host), refused_with) {
                (Ok(()), None) => {}
                (Err(why), Some(part)) => assert!(why.contains(part), "{claim:?} {host}: {why}"),
                (got, want) => panic!("{claim:?} {host}: got {got:?}, want {want:?}"),
            }
        }
    }
}
