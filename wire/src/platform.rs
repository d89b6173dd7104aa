//! Who a VM is on the platform that runs it: the names admins know it by, where QEMU's own name
//! (`instance-0000a1b2`, `default_vm-a`) says little. Read by the host agent from the platform's
//! own records (libvirt's `nova:` metadata, Proxmox's `-id` and configuration, KubeVirt's domain
//! name); written by whoever created the VM, so hostile until cleaned.

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_LABEL_CHARS, MAX_NAME_CHARS, clean_text};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Platform {
    /// Which platform: `openstack`, `proxmox` or `kubevirt` (others may come).
    pub kind: String,
    /// The VM's name there: Nova's display name, Proxmox's name, the VirtualMachineInstance's.
    #[serde(default)]
    pub name: Option<String>,
    /// What it belongs to: its Nova project, its Kubernetes namespace.
    #[serde(default)]
    pub group: Option<String>,
    /// Its size there: the Nova flavor.
    #[serde(default)]
    pub flavor: Option<String>,
    /// Its id there: Proxmox's VMID, Nova's instance UUID.
    #[serde(default)]
    pub id: Option<String>,
}

impl Platform {
    /// The names made acceptable: control characters replaced, each cut, blanks dropped.
    pub fn cleaned(self) -> Platform {
        // Cut, then trimmed again, so that cleaning twice gives what cleaning once gave.
        let clean = |s: &str, max: usize| clean_text(s.trim(), max).trim_end().to_string();
        let text =
            |s: Option<String>, max: usize| s.map(|s| clean(&s, max)).filter(|s| !s.is_empty());
        Platform {
            kind: clean(&self.kind, MAX_LABEL_CHARS),
            name: text(self.name, MAX_NAME_CHARS),
            group: text(self.group, MAX_NAME_CHARS),
            flavor: text(self.flavor, MAX_LABEL_CHARS),
            id: text(self.id, MAX_LABEL_CHARS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_blanks_dropped() {
        let p = Platform {
            kind: "openstack".into(),
            name: Some(" web\u{1b}[2J ".into()),
            group: Some("   ".into()),
            flavor: Some("m1.small".into()),
            id: None,
        }
        .cleaned();
        assert_eq!(p.name.as_deref(), Some("web\u{FFFD}[2J"));
        assert_eq!(p.group, None);
        assert_eq!(p.flavor.as_deref(), Some("m1.small"));
        assert_eq!(p.clone().cleaned(), p);
        let cut = Platform {
            kind: format!("{} x", "k".repeat(MAX_LABEL_CHARS - 1)),
            name: Some(format!("{} y", "n".repeat(MAX_NAME_CHARS - 1))),
            group: None,
            flavor: None,
            id: None,
        }
        .cleaned();
        assert_eq!(cut.clone().cleaned(), cut, "a cut that ends on a blank");
    }
}
