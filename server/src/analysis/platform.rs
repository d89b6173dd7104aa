//! What the host knows of a guest's platform beyond its samples: which OS it runs, the Hyper-V
//! enlightenments and the HPET its VM is given. The rules read it to tell a Windows guest's
//! cause from a Linux one's and never give a Windows guest Linux advice.

use serde::Serialize;

use super::kernel::KernelFacts;

/// What the VM's command line or its manager's definition said of its setup, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct VmSetup {
    /// Its Hyper-V enlightenments, by QEMU's names without `hv-`, sorted; `None`: unknown.
    pub hyperv: Option<Vec<String>>,
    /// Whether it has an emulated HPET; `None`: unknown.
    pub hpet: Option<bool>,
    /// The OS its manager names (a libosinfo id, a Proxmox `ostype`, a VMware `guestOS`).
    pub os_hint: Option<String>,
}

/// The enlightenments a Windows guest needs for its timers to be Hyper-V's synthetic timers
/// instead of an emulated HPET or RTC (QEMU's docs/system/i386/hyperv.rst: `hv-stimer` needs
/// `hv-synic`, `hv-vpindex` and `hv-time`), with the ones every Windows guest should have.
pub const HYPERV_TIMER_SET: [&str; 8] = [
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "time",
    "synic",
    "stimer",
];

impl VmSetup {
    /// The setup as storage keeps it: the enlightenments as one comma-separated text.
    pub fn from_stored(hyperv: Option<&str>, hpet: Option<bool>, os_hint: Option<&str>) -> Self {
        VmSetup {
            hyperv: hyperv.map(|list| {
                list.split(',')
                    .filter(|f| !f.is_empty())
                    .map(str::to_string)
                    .collect()
            }),
            hpet,
            os_hint: os_hint.map(str::to_string),
        }
    }

    /// Whether the VM has Hyper-V's synthetic timers (`hv-passthrough` gives every one the host
    /// has); `None` when its enlightenments are not known.
    pub fn has_stimer(&self) -> Option<bool> {
        let flags = self.hyperv.as_ref()?;
        Some(flags.iter().any(|f| f == "stimer" || f == "passthrough"))
    }

    /// Of [`HYPERV_TIMER_SET`], the enlightenments it lacks, in that order.
    pub fn missing_hyperv(&self) -> Vec<&'static str> {
        let flags = self.hyperv.as_deref().unwrap_or_default();
        if flags.iter().any(|f| f == "passthrough") {
            return Vec::new();
        }
        HYPERV_TIMER_SET
            .into_iter()
            .filter(|want| !flags.iter().any(|f| f == want))
            .collect()
    }
}

/// Which kind of OS a guest runs, as far as anything tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OsFamily {
    Linux,
    Windows,
    /// Another OS (a BSD, Solaris, ...): neither Linux nor Windows advice fits.
    Other,
    /// Nothing tells: judged as the Linux guest most guests are, and said so.
    Unknown,
}

impl OsFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            OsFamily::Linux => "linux",
            OsFamily::Windows => "windows",
            OsFamily::Other => "other",
            OsFamily::Unknown => "unknown",
        }
    }

    /// Whether a guest of this family may be told a Linux kernel or boot-line change.
    pub fn may_be_linux(self) -> bool {
        matches!(self, OsFamily::Linux | OsFamily::Unknown)
    }
}

/// The guest's OS and what said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct GuestOs {
    pub family: OsFamily,
    /// Where it was read, for the guest page: `qemu_guest_agent: mswindows`,
    /// `manager: win10`.
    pub evidence: Option<String>,
}

/// Names of other OSes, as libosinfo ids, Proxmox `ostype`s and VMware `guestOS` values write
/// them (lower-cased), before a Windows or Linux name is looked for.
const OTHER_OS_MARKS: [&str; 8] = [
    "freebsd",
    "openbsd",
    "netbsd",
    "dragonfly",
    "solaris",
    "illumos",
    "darwin",
    "haiku",
];
/// libosinfo's and VMware's names of Linux distributions; Proxmox writes `l24` and `l26`.
const LINUX_MARKS: [&str; 22] = [
    "linux",
    "debian",
    "ubuntu",
    "redhat",
    "rhel",
    "centos",
    "fedora",
    "almalinux",
    "rocky",
    "suse",
    "sles",
    "opensuse",
    "archlinux",
    "alpine",
    "gentoo",
    "oraclelinux",
    "/ol/",
    "amazon",
    "mageia",
    "slackware",
    "nixos",
    "coreos",
];

/// What the guest's own facts say first (the guest agent's `id` is `mswindows` for Windows; the
/// probe runs only on Linux), then the manager's name for it.
pub fn guest_os(facts: Option<&KernelFacts>, os_hint: Option<&str>) -> GuestOs {
    if let Some(k) = facts {
        if let Some(id) = k.os_id.as_deref() {
            let family = match id {
                "mswindows" => OsFamily::Windows,
                _ => classify(id).unwrap_or(OsFamily::Linux),
            };
            return GuestOs {
                family,
                evidence: Some(format!("{}: {id}", k.source)),
            };
        }
        if k.source.starts_with("probe") {
            return GuestOs {
                family: OsFamily::Linux,
                evidence: Some(format!("{}: a Linux kernel's own facts", k.source)),
            };
        }
    }
    if let Some(hint) = os_hint
        && let Some(family) = classify(hint)
    {
        return GuestOs {
            family,
            evidence: Some(format!("manager: {hint}")),
        };
    }
    GuestOs {
        family: OsFamily::Unknown,
        evidence: None,
    }
}

/// The family an OS name gives, if it names one: `http://microsoft.com/win/10`, `win11`, `w2k8`,
/// `windows9srv-64`, `l26`, `http://debian.org/debian/12`, `freebsd13-64`.
fn classify(name: &str) -> Option<OsFamily> {
    let name = name.to_ascii_lowercase();
    let windows = name.contains("microsoft.com/win")
        || name.starts_with("win")
        || name.starts_with("w2k")
        || matches!(name.as_str(), "wxp" | "wvista");
    if OTHER_OS_MARKS.iter().any(|m| name.contains(m)) {
        Some(OsFamily::Other)
    } else if windows {
        Some(OsFamily::Windows)
    } else if matches!(name.as_str(), "l24" | "l26") || LINUX_MARKS.iter().any(|m| name.contains(m))
    {
        Some(OsFamily::Linux)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickscope_wire::GuestFacts;

    fn facts(source: &str, distro_id: Option<&str>) -> KernelFacts {
        let facts = GuestFacts {
            distro_id: distro_id.map(str::to_string),
            ..GuestFacts::default()
        };
        KernelFacts::new(&facts, source, 0.0)
    }

    #[test]
    fn the_os_comes_from_the_guest_first_then_its_manager() {
        let windows = facts("qemu_guest_agent", Some("mswindows"));
        let debian = facts("qemu_guest_agent", Some("debian"));
        let probe = facts("probe_channel", None);
        let silent = facts("qemu_guest_agent", None);
        let cases: [(Option<&KernelFacts>, Option<&str>, OsFamily); 14] = [
            (Some(&windows), None, OsFamily::Windows),
            // The guest's own word wins over a stale manager label.
            (Some(&windows), Some("l26"), OsFamily::Windows),
            (Some(&debian), Some("win10"), OsFamily::Linux),
            (Some(&probe), None, OsFamily::Linux),
            (Some(&silent), Some("win11"), OsFamily::Windows),
            (None, Some("http://microsoft.com/win/10"), OsFamily::Windows),
            (None, Some("w2k8"), OsFamily::Windows),
            (None, Some("windows9srv-64"), OsFamily::Windows),
            (None, Some("l26"), OsFamily::Linux),
            (None, Some("http://debian.org/debian/12"), OsFamily::Linux),
            (None, Some("freebsd13-64"), OsFamily::Other),
            (
                None,
                Some("http://freebsd.org/freebsd/14.0"),
                OsFamily::Other,
            ),
            (None, Some("other"), OsFamily::Unknown),
            (None, None, OsFamily::Unknown),
        ];
        for (facts, hint, family) in cases {
            assert_eq!(guest_os(facts, hint).family, family, "{facts:?} {hint:?}");
        }
        assert_eq!(
            guest_os(Some(&windows), None).evidence.as_deref(),
            Some("qemu_guest_agent: mswindows")
        );
        assert_eq!(
            guest_os(None, Some("win10")).evidence.as_deref(),
            Some("manager: win10")
        );
    }

    #[test]
    fn stimer_is_known_only_where_the_enlightenments_are() {
        let setup = |hyperv: Option<&str>| VmSetup::from_stored(hyperv, None, None);
        assert_eq!(setup(None).has_stimer(), None);
        assert_eq!(setup(Some("")).has_stimer(), Some(false));
        assert_eq!(setup(Some("relaxed,stimer,synic")).has_stimer(), Some(true));
        assert_eq!(setup(Some("passthrough")).has_stimer(), Some(true));
        assert_eq!(
            setup(Some("relaxed,spinlocks,time,vapic")).missing_hyperv(),
            ["vpindex", "runtime", "synic", "stimer"]
        );
        assert!(setup(Some("passthrough")).missing_hyperv().is_empty());
        assert_eq!(
            setup(Some("")).missing_hyperv().len(),
            HYPERV_TIMER_SET.len()
        );
    }
}
