//! What guests say about themselves, gathered as the cycle goes: the guest probe's channel is
//! read with the VM's counters, guest agents are asked once every VM's counters are read.

use std::time::{Duration, Instant};

use super::tracked::VmState;
use crate::channel::Channel;
use crate::clock::SampleClock;
use crate::wire::{DeliveredFacts, FactsSource};

/// The libvirt connection of the system's VMs (libvirtd or virtqemud as root).
pub const DEFAULT_LIBVIRT_URI: &str = "qemu:///system";
/// Longest time one cycle spends asking guest agents.
const GUEST_AGENT_BUDGET: Duration = Duration::from_secs(2);

/// Keeps what the guest probe sent on the VM's channel since the last cycle, if anything, to go
/// out with the VM's next sample.
pub(super) fn poll_probe_channel(vm: &mut VmState, now_ms: i64) {
    if let Some(facts) = vm.channel.as_mut().and_then(Channel::poll) {
        vm.unreported_facts = Some(DeliveredFacts {
            source: FactsSource::ProbeChannel,
            received_ms: now_ms,
            facts,
        });
    }
}

/// Asks the guest agents due in this cycle. They can take up to a second to answer: asked only
/// after every VM's counters were read, so the wait does not stretch anyone's interval, and for
/// at most GUEST_AGENT_BUDGET per cycle (the others wait for the next cycle). Their answers go
/// out with the next report, unless the probe's facts, which say more, arrive first.
pub(super) fn ask_guest_agents<'a>(
    vms: impl Iterator<Item = &'a mut VmState>,
    cycle: u64,
    clock: &SampleClock,
) {
    let asking_since = Instant::now();
    for vm in vms {
        if asking_since.elapsed() >= GUEST_AGENT_BUDGET {
            break;
        }
        if let Some((facts, source)) = vm.guest_agent.as_mut().and_then(|a| a.ask(cycle)) {
            vm.unreported_facts = Some(DeliveredFacts {
                source,
                received_ms: clock.now().1,
                facts,
            });
        }
    }
}
