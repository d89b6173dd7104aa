//! Guest facts at the server's edge: checking them, telling a change from a repeat, and finding
//! the guest they belong to.

use tickscope_wire::GuestFacts;

use crate::error::{AppError, AppResult};

/// Facts ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidFacts {
    pub source: &'static str,
    pub facts: GuestFacts,
    /// The full facts, as stored.
    pub facts_json: String,
    /// The facts without their rates: equal for two readings of an unchanged guest.
    pub stable_json: String,
}

/// Accepts facts only if they are already clean (what the agent and the probe send): a string
/// with control characters, an impossible number or an over-long list is refused, not repaired.
pub fn validate(field: &str, source: &'static str, facts: GuestFacts) -> AppResult<ValidFacts> {
    if facts.clone().cleaned() != facts {
        return Err(AppError::invalid(
            field,
            "has control characters, over-long strings or impossible values",
        ));
    }
    // A change worth an event: another kernel, build, distribution release or command line.
    // Rates, CPU counts and clocksource switches are not events.
    let stable = GuestFacts {
        kernel_release: facts.kernel_release.clone(),
        kernel_version: facts.kernel_version.clone(),
        distro_id: facts.distro_id.clone(),
        distro_version_id: facts.distro_version_id.clone(),
        config: facts.config.clone(),
        cmdline: facts.cmdline.clone(),
        ..GuestFacts::default()
    };
    let json = |f: &GuestFacts| {
        serde_json::to_string(f).map_err(|e| AppError::encode("guest facts as JSON", e))
    };
    Ok(ValidFacts {
        source,
        facts_json: json(&facts)?,
        stable_json: json(&stable)?,
        facts,
    })
}

/// A UUID as written, and with the first three fields byte-swapped: VMware and Hyper-V expose
/// the SMBIOS UUID to the guest in the other byte order than the host tools show it.
pub fn uuid_forms(uuid: &str) -> [String; 2] {
    let swap = |hex: &str| -> String {
        let bytes: Vec<&str> = (0..hex.len()).step_by(2).map(|i| &hex[i..i + 2]).collect();
        bytes.into_iter().rev().collect()
    };
    let parts: Vec<&str> = uuid.split('-').collect();
    let swapped = if parts.len() == 5 && parts[..3].iter().all(|p| p.len() % 2 == 0) {
        format!(
            "{}-{}-{}-{}-{}",
            swap(parts[0]),
            swap(parts[1]),
            swap(parts[2]),
            parts[3],
            parts[4]
        )
    } else {
        uuid.to_string()
    };
    [uuid.to_string(), swapped]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_swapped_form_swaps_the_first_three_fields() {
        assert_eq!(
            uuid_forms("564d9a3b-1234-5678-9abc-def012345678"),
            [
                "564d9a3b-1234-5678-9abc-def012345678".to_string(),
                "3b9a4d56-3412-7856-9abc-def012345678".to_string()
            ]
        );
    }

    #[test]
    fn rates_do_not_make_a_change_but_a_new_kernel_does() {
        let a = GuestFacts {
            kernel_release: Some("6.1.0-57".into()),
            measured_hz: Some(250.2),
            idle_fraction: Some(0.99),
            ..Default::default()
        };
        let b = GuestFacts {
            measured_hz: Some(249.7),
            idle_fraction: Some(0.97),
            ..a.clone()
        };
        let c = GuestFacts {
            kernel_release: Some("6.1.0-58".into()),
            ..a.clone()
        };
        let stable = |f: GuestFacts| validate("facts", "probe_channel", f).unwrap().stable_json;
        assert_eq!(stable(a.clone()), stable(b));
        assert_ne!(stable(a), stable(c));
    }

    #[test]
    fn hotplugged_cpus_and_clocksource_switches_are_not_events() {
        let a = GuestFacts {
            kernel_release: Some("6.1.0-57".into()),
            cpus: Some(2),
            clocksource: Some("kvm-clock".into()),
            ..Default::default()
        };
        let b = GuestFacts {
            cpus: Some(4),
            clocksource: Some("tsc".into()),
            ..a.clone()
        };
        let stable = |f: GuestFacts| validate("facts", "probe_channel", f).unwrap().stable_json;
        assert_eq!(stable(a), stable(b));
    }

    #[test]
    fn unclean_facts_are_refused() {
        let bad = GuestFacts {
            cmdline: Some("quiet\nnohz=off".into()),
            ..Default::default()
        };
        assert!(matches!(
            validate("guests[0].facts", "probe_channel", bad),
            Err(AppError::Invalid { field, .. }) if field == "guests[0].facts"
        ));
    }
}
