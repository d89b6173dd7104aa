//! What making a suggested change takes: a reboot, a new kernel, a VM restart, a host setting, or
//! a look inside the guest first. Planners schedule by it (a reboot fits a maintenance window, a
//! new kernel needs building or testing), so each suggestion says which it is.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A parameter of the guest kernel's command line: edit the boot loader, reboot.
    BootParameter,
    /// A setting of the running guest (a sysfs file): takes effect at once, no reboot.
    GuestSetting,
    /// A kernel built with other options (NO_HZ, a lower CONFIG_HZ): a new kernel, a reboot.
    KernelConfig,
    /// A newer kernel or distribution release: an upgrade, a reboot.
    KernelUpgrade,
    /// The VM's definition on the hypervisor (its vCPUs): a restart of the VM.
    VmConfig,
    /// A setting of the hypervisor host, for every guest on it: no guest reboot.
    HostSide,
    /// Something to find out in the guest first; what to change follows from it.
    Investigate,
}

/// What a change disrupts, coarser than its kind: the column a planner sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Needs {
    /// Nothing restarts.
    NoReboot,
    /// The guest reboots into the kernel it has.
    Reboot,
    /// The guest gets another kernel, then reboots.
    NewKernel,
    /// The VM is stopped and started again by the hypervisor.
    VmRestart,
    /// Not known until the guest has been looked at.
    Unknown,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 7] = [
        ChangeKind::BootParameter,
        ChangeKind::GuestSetting,
        ChangeKind::KernelConfig,
        ChangeKind::KernelUpgrade,
        ChangeKind::VmConfig,
        ChangeKind::HostSide,
        ChangeKind::Investigate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::BootParameter => "boot_parameter",
            ChangeKind::GuestSetting => "guest_setting",
            ChangeKind::KernelConfig => "kernel_config",
            ChangeKind::KernelUpgrade => "kernel_upgrade",
            ChangeKind::VmConfig => "vm_config",
            ChangeKind::HostSide => "host_side",
            ChangeKind::Investigate => "investigate",
        }
    }

    pub fn needs(self) -> Needs {
        match self {
            ChangeKind::BootParameter => Needs::Reboot,
            ChangeKind::GuestSetting | ChangeKind::HostSide => Needs::NoReboot,
            ChangeKind::KernelConfig | ChangeKind::KernelUpgrade => Needs::NewKernel,
            ChangeKind::VmConfig => Needs::VmRestart,
            ChangeKind::Investigate => Needs::Unknown,
        }
    }
}

impl Needs {
    pub fn as_str(self) -> &'static str {
        match self {
            Needs::NoReboot => "no_reboot",
            Needs::Reboot => "reboot",
            Needs::NewKernel => "new_kernel",
            Needs::VmRestart => "vm_restart",
            Needs::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_says_what_it_disrupts_and_writes_as_its_serde_name() {
        let cases = [
            (ChangeKind::BootParameter, "boot_parameter", "reboot"),
            (ChangeKind::GuestSetting, "guest_setting", "no_reboot"),
            (ChangeKind::KernelConfig, "kernel_config", "new_kernel"),
            (ChangeKind::KernelUpgrade, "kernel_upgrade", "new_kernel"),
            (ChangeKind::VmConfig, "vm_config", "vm_restart"),
            (ChangeKind::HostSide, "host_side", "no_reboot"),
            (ChangeKind::Investigate, "investigate", "unknown"),
        ];
        assert_eq!(cases.len(), ChangeKind::ALL.len());
        for (kind, name, needs) in cases {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.needs().as_str(), needs, "{kind:?}");
            // The JSON exports and the CSV ones say the same.
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(serde_json::to_value(kind.needs()).unwrap(), needs);
        }
    }
}
