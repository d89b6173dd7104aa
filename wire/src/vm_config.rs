//! What the host sees of a VM's configuration that decides how much its idle vCPUs cost: the
//! Hyper-V enlightenments it gives a Windows guest, whether it has an emulated HPET, and the OS
//! its manager says it runs. Read from the VM's command line or its manager's definition, never
//! from inside the guest; still written by whoever defined the VM, so checked like any name.

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_LABEL_CHARS, clean_text};

/// Most Hyper-V enlightenments one VM may list (QEMU knows about twenty).
pub const MAX_HYPERV_FLAGS: usize = 32;
/// Longest enlightenment name, in characters (`tlbflush-direct` is the longest QEMU has).
pub const MAX_HYPERV_FLAG_CHARS: usize = 32;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct VmConfig {
    /// The Hyper-V enlightenments the VM is given, by QEMU's names without their `hv-` prefix
    /// (`relaxed`, `vapic`, `time`, `synic`, `stimer`, `vpindex`, ...; `passthrough` for
    /// `hv-passthrough`), sorted, each once. Empty: none. `None`: the agent could not tell.
    pub hyperv: Option<Vec<String>>,
    /// Whether the VM has an emulated HPET. `None`: the agent could not tell.
    pub hpet: Option<bool>,
    /// The OS the VM's manager says the guest runs: a libosinfo id
    /// (`http://microsoft.com/win/10`) or a Proxmox `ostype` (`win10`, `l26`).
    pub os_hint: Option<String>,
}

impl VmConfig {
    /// Whether the configuration says anything at all.
    pub fn is_empty(&self) -> bool {
        self.hyperv.is_none() && self.hpet.is_none() && self.os_hint.is_none()
    }

    /// The configuration with every name made acceptable: enlightenments only as QEMU spells
    /// them (others dropped), sorted, each once, at most [`MAX_HYPERV_FLAGS`]; the hint cleaned
    /// and cut.
    pub fn cleaned(self) -> VmConfig {
        VmConfig {
            hyperv: self.hyperv.map(|flags| {
                let mut flags: Vec<String> =
                    flags.into_iter().filter(|f| is_flag_name(f)).collect();
                flags.sort();
                flags.dedup();
                flags.truncate(MAX_HYPERV_FLAGS);
                flags
            }),
            hpet: self.hpet,
            // Cut, then trimmed again: a cut can end on a blank, and cleaning twice must give
            // what cleaning once gave (the server refuses what the agent's cleaning would change).
            os_hint: self
                .os_hint
                .map(|h| clean_text(h.trim(), MAX_LABEL_CHARS).trim_end().to_string())
                .filter(|h| !h.is_empty()),
        }
    }
}

/// Whether `name` is written as QEMU writes an enlightenment: lower-case letters, digits and
/// dashes, not too long.
pub fn is_flag_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HYPERV_FLAG_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_sorts_and_dedups_flags_and_drops_what_qemu_cannot_name() {
        let config = VmConfig {
            hyperv: Some(vec![
                "stimer".into(),
                "relaxed".into(),
                "stimer".into(),
                "Synic".into(),
                "x\u{1b}[2J".into(),
                "a".repeat(40),
            ]),
            hpet: Some(false),
            os_hint: Some("  win10\n ".into()),
        }
        .cleaned();
        assert_eq!(
            config.hyperv,
            Some(vec!["relaxed".to_string(), "stimer".to_string()])
        );
        assert_eq!(config.hpet, Some(false));
        assert_eq!(config.os_hint.as_deref(), Some("win10"));
        assert_eq!(
            VmConfig {
                os_hint: Some("   ".into()),
                ..VmConfig::default()
            }
            .cleaned()
            .os_hint,
            None
        );
    }

    #[test]
    fn cleaning_twice_gives_what_cleaning_once_gave() {
        let hints = [
            format!("{} b", "a".repeat(MAX_LABEL_CHARS - 1)),
            format!(" {}  ", "é".repeat(MAX_LABEL_CHARS + 3)),
            "\u{1b} win10 \t".to_string(),
            " \n ".to_string(),
        ];
        for hint in hints {
            let once = VmConfig {
                os_hint: Some(hint.clone()),
                hyperv: Some(vec!["stimer".into(), "Bad".into(), "relaxed".into()]),
                hpet: None,
            }
            .cleaned();
            assert_eq!(once.clone().cleaned(), once, "{hint:?}");
        }
    }
}
