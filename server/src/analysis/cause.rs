//! Why an idle guest costs its host CPU: the causes tickscope names. Each rule of
//! [`super::suggest`] blames one, and [`super::attribution`] files each guest under one (the
//! list's filter, the overview's breakdown, the alerts' `cause` label, the plan's sections).

use serde::Serialize;

use super::tick_mode::TickMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The guest kernel's timer tick keeps running on idle vCPUs (`nohz=off`, a kernel built
    /// without NO_HZ or older than it).
    TickingKernel,
    /// A Windows guest without Hyper-V's synthetic timers, on emulated ones.
    WindowsTimers,
    /// KVM on the host spins on halted vCPUs (`halt_poll_ns`).
    HostHaltPolling,
    /// The guest's tick or clock runs on a timer the hypervisor emulates (PIT, HPET, ACPI PM).
    EmulatedTimer,
    /// Idle vCPUs spin in the guest instead of halting (`idle=poll`, cpuidle-haltpoll).
    GuestPolling,
    /// Parts of the VM other than its vCPUs: I/O threads, vhost workers, QEMU's main loop.
    VmThreads,
    /// The kernel would idle, but programs in the guest keep waking it (a 1 ms Windows timer,
    /// timers of Linux processes).
    GuestPrograms,
}

impl Cause {
    pub const ALL: [Cause; 7] = [
        Cause::TickingKernel,
        Cause::WindowsTimers,
        Cause::HostHaltPolling,
        Cause::EmulatedTimer,
        Cause::GuestPolling,
        Cause::VmThreads,
        Cause::GuestPrograms,
    ];

    /// Its name in URLs, the API, labels and exports.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::TickingKernel => "ticking_kernel",
            Cause::WindowsTimers => "windows_timers",
            Cause::HostHaltPolling => "host_halt_polling",
            Cause::EmulatedTimer => "emulated_timer",
            Cause::GuestPolling => "guest_polling",
            Cause::VmThreads => "vm_threads",
            Cause::GuestPrograms => "guest_programs",
        }
    }

    pub fn parse(text: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// Its name for people.
    pub fn label(self) -> &'static str {
        match self {
            Cause::TickingKernel => "Ticking kernel",
            Cause::WindowsTimers => "Windows without Hyper-V timers",
            Cause::HostHaltPolling => "Host halt-polling",
            Cause::EmulatedTimer => "Emulated timer",
            Cause::GuestPolling => "Polling in the guest",
            Cause::VmThreads => "The VM's own threads",
            Cause::GuestPrograms => "Programs in the guest",
        }
    }

    /// What a change that helps any guest that wastes by its tick or its polling (fewer vCPUs)
    /// blames: what makes that guest wasteful.
    pub fn of_wasteful_mode(mode: TickMode) -> Cause {
        match mode {
            TickMode::Polling => Cause::GuestPolling,
            _ => Cause::TickingKernel,
        }
    }

    /// Whether its waste is the VM's other threads' rather than its vCPUs' (and so adds to the
    /// tick's, which leaves those threads out).
    pub fn outside_the_vcpus(self) -> bool {
        self == Cause::VmThreads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for cause in Cause::ALL {
            assert_eq!(Cause::parse(cause.as_str()), Some(cause));
            let json = serde_json::to_value(cause).unwrap();
            assert_eq!(json, cause.as_str(), "serde and as_str agree");
        }
        assert_eq!(Cause::parse("ticking"), None);
    }
}
