//! When to ask a VM's guest agent, and through what.
//!
//! A guest agent starts some seconds after its VM (the guest boots first), so a VM that has just
//! appeared is asked again soon until it first answers; after that, its kernel changes only on a
//! reboot, which the facts' process identity already catches, so it is asked rarely.

use std::path::Path;

use super::{qga, virtualbox};
use crate::discover::VmIdentity;
use crate::wire::{FactsSource, GuestFacts, Hypervisor};

/// Cycles between two questions once the agent answered (10 min at 10 s).
pub const EVERY_CYCLES_ONCE_ANSWERED: u64 = 60;
/// Longest wait before asking again an agent that never answered yet (1 min at 10 s): a guest
/// agent that comes up late is heard within a minute of it.
pub const MAX_CYCLES_UNTIL_FIRST_ANSWER: u64 = 6;
/// Longest wait before asking again an agent that answered once and then stopped (1 h at 10 s).
pub const MAX_BACKOFF_CYCLES: u64 = 360;

/// How to reach a VM's guest agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// qemu-guest-agent's socket, free to connect to.
    QgaSocket(String),
    /// qemu-guest-agent behind libvirt, which holds the socket: its guest-info API.
    Libvirt { uri: String, domain: String },
    /// VirtualBox guest properties, by VM UUID or name.
    VirtualBox(String),
}

impl Via {
    /// How this VM's agent can be asked, if it may have one. libvirt is asked by UUID, over
    /// `libvirt_uri`.
    pub fn for_vm(identity: &VmIdentity, libvirt_uri: &str) -> Option<Via> {
        let by_uuid_or_name = || {
            identity
                .uuid
                .clone()
                .unwrap_or_else(|| identity.name.clone())
        };
        match (identity.hypervisor, &identity.guest_agent_socket) {
            // libvirt holds the agent's socket itself.
            (Hypervisor::Qemu, _)
                if identity.guest_agent_port
                    && identity.management.as_deref() == Some("libvirt") =>
            {
                Some(Via::Libvirt {
                    uri: libvirt_uri.to_string(),
                    domain: by_uuid_or_name(),
                })
            }
            (Hypervisor::Qemu, Some(socket)) => Some(Via::QgaSocket(socket.clone())),
            (Hypervisor::Virtualbox, _) => Some(Via::VirtualBox(by_uuid_or_name())),
            _ => None,
        }
    }

    fn ask(&self, sync_id: u64) -> Option<(GuestFacts, FactsSource)> {
        match self {
            Via::QgaSocket(path) => qga::osinfo_from_socket(Path::new(path), sync_id)
                .map(|f| (f, FactsSource::QemuGuestAgent)),
            Via::Libvirt { uri, domain } => {
                qga::osinfo_from_libvirt(uri, domain).map(|f| (f, FactsSource::QemuGuestAgent))
            }
            Via::VirtualBox(vm) => {
                virtualbox::os_properties(vm).map(|f| (f, FactsSource::VirtualboxProperties))
            }
        }
    }
}

/// One VM's guest agent and when it is asked next.
#[derive(Debug)]
pub struct GuestAgent {
    pub via: Via,
    next_cycle: u64,
    /// Questions without an answer since the last answer.
    failures: u32,
    answered_ever: bool,
}

impl GuestAgent {
    /// A VM's agent, first asked at `first_cycle`.
    pub fn new(via: Via, first_cycle: u64) -> Self {
        GuestAgent {
            via,
            next_cycle: first_cycle,
            failures: 0,
            answered_ever: false,
        }
    }

    pub fn due(&self, cycle: u64) -> bool {
        cycle >= self.next_cycle
    }

    /// Asks, if it is time; schedules the next question either way.
    pub fn ask(&mut self, cycle: u64) -> Option<(GuestFacts, FactsSource)> {
        if !self.due(cycle) {
            return None;
        }
        let answer = self.via.ask(cycle);
        if answer.is_some() {
            self.failures = 0;
            self.answered_ever = true;
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        self.next_cycle = cycle + cycles_until_next(self.answered_ever, self.failures);
        answer
    }
}

/// Cycles to wait before the next question, after `failures` unanswered ones in a row (0: the
/// last one was answered). Never yet answered: 1, 2, 4, then every `MAX_CYCLES_UNTIL_FIRST_ANSWER`.
/// Answered before: the slow schedule, doubling from it on failures up to `MAX_BACKOFF_CYCLES`.
pub fn cycles_until_next(answered_ever: bool, failures: u32) -> u64 {
    let doubling = |base: u64| base.saturating_mul(1 << failures.saturating_sub(1).min(16));
    if !answered_ever {
        doubling(1).min(MAX_CYCLES_UNTIL_FIRST_ANSWER)
    } else if failures == 0 {
        EVERY_CYCLES_ONCE_ANSWERED
    } else {
        doubling(EVERY_CYCLES_ONCE_ANSWERED).min(MAX_BACKOFF_CYCLES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_agent_is_asked_again_soon_until_it_answers_then_rarely() {
        // (answered before, unanswered in a row, cycles until the next question)
        let cases = [
            (false, 1, 1),
            (false, 2, 2),
            (false, 3, 4),
            (false, 4, MAX_CYCLES_UNTIL_FIRST_ANSWER),
            (false, 40, MAX_CYCLES_UNTIL_FIRST_ANSWER),
            (true, 0, EVERY_CYCLES_ONCE_ANSWERED),
            (true, 1, EVERY_CYCLES_ONCE_ANSWERED),
            (true, 2, 2 * EVERY_CYCLES_ONCE_ANSWERED),
            (true, 3, 4 * EVERY_CYCLES_ONCE_ANSWERED),
            (true, 4, MAX_BACKOFF_CYCLES),
            (true, u32::MAX, MAX_BACKOFF_CYCLES),
        ];
        for (answered, failures, expected) in cases {
            assert_eq!(
                cycles_until_next(answered, failures),
                expected,
                "answered before: {answered}, failures: {failures}"
            );
        }
    }

    #[test]
    fn libvirt_domains_are_asked_through_libvirt_by_uuid() {
        let mut vm = VmIdentity::new(Hypervisor::Qemu, "1234");
        vm.management = Some("libvirt".into());
        vm.guest_agent_port = true;
        vm.guest_agent_socket = Some("/var/lib/libvirt/qemu/channel/target/x".into());
        vm.uuid = Some("6f0e2b5c-52b1-4d3e-9d0f-7b1a7b0c1d2e".into());
        assert_eq!(
            Via::for_vm(&vm, "qemu:///system"),
            Some(Via::Libvirt {
                uri: "qemu:///system".into(),
                domain: "6f0e2b5c-52b1-4d3e-9d0f-7b1a7b0c1d2e".into()
            }),
            "a numeric name would be read as a domain id"
        );
        let mut plain = VmIdentity::new(Hypervisor::Qemu, "web");
        plain.guest_agent_socket = Some("/run/qga.sock".into());
        assert_eq!(
            Via::for_vm(&plain, "qemu:///system"),
            Some(Via::QgaSocket("/run/qga.sock".into()))
        );
        assert_eq!(
            Via::for_vm(&VmIdentity::new(Hypervisor::Firecracker, "fc"), "x"),
            None
        );
    }
}
