//! What the agent cannot see or reach on its host, for the report's blind spots: `/proc` hiding
//! other users' processes, libvirt out of reach, VMs whose descriptors or sockets are closed to
//! it.

use std::path::Path;

use super::facts::DEFAULT_LIBVIRT_URI;
use super::tracked::{Part, VmState};
use crate::blind_spots::{self, Seen};
use crate::discover::VmIdentity;
use crate::guest_agent::schedule::Via;
use crate::wire::BlindSpot;

/// What is looked at of the host itself, which costs more than a read of `/proc` (a mount's
/// options, a call to libvirt): kept from the last look.
#[derive(Default)]
pub(super) struct HostSight {
    /// Whether `/proc` hides other users' processes.
    proc_hidden: bool,
    /// Why libvirt could not be reached, when it has domains here and could not.
    libvirt_error: Option<String>,
}

impl HostSight {
    /// What this cycle could not see. `/proc`'s mount and libvirt are looked at again only when
    /// `look_again` (the first cycle and full rescans, every few minutes).
    pub fn blind_spots(
        &mut self,
        proc_root: &Path,
        libvirt_uri: &str,
        vms: &[&VmState],
        look_again: bool,
    ) -> Vec<BlindSpot> {
        let libvirt_domains = vms
            .iter()
            .filter(|vm| vm.identity.management.as_deref() == Some("libvirt"))
            .count();
        if look_again {
            self.proc_hidden = blind_spots::proc_hidden(proc_root);
            self.libvirt_error = (libvirt_domains > 0)
                .then(|| blind_spots::libvirt_unreachable(libvirt_uri))
                .flatten();
        }
        let unreadable: Vec<&&VmState> = vms.iter().filter(|vm| vm.uses_kvm.is_none()).collect();
        let no_halt_poll: Vec<&&VmState> =
            vms.iter().filter(|vm| vm.halt_poll_unreadable).collect();
        let denied: Vec<&String> = vms.iter().flat_map(|vm| &vm.channels_denied).collect();
        // Its threads listed, none a vhost worker: they run as kernel threads (before Linux 6.4).
        let vhost_outside: Vec<&&VmState> = vms
            .iter()
            .filter(|vm| {
                vm.holds_vhost
                    && vm.listed_threads.is_some()
                    && !vm.threads.values().any(|t| t.part == Part::Vhost)
            })
            .collect();
        blind_spots::blind_spots(&Seen {
            proc_hidden: self.proc_hidden,
            vm_fds_unreadable: unreadable.len(),
            vm_fds_example: unreadable.first().map(|vm| vm.identity.name.clone()),
            channels_denied: denied.len(),
            channel_example: denied.first().map(|p| p.to_string()),
            libvirt_domains,
            libvirt_error: self.libvirt_error.clone(),
            libvirt_uri: libvirt_uri.to_string(),
            halt_poll_unreadable: no_halt_poll.len(),
            halt_poll_example: no_halt_poll.first().map(|vm| vm.identity.name.clone()),
            vhost_outside: vhost_outside.len(),
            vhost_example: vhost_outside.first().map(|vm| vm.identity.name.clone()),
        })
    }
}

/// The VM's probe and guest agent sockets that exist but refuse this agent: connecting to a
/// UNIX socket needs write permission on it.
pub(super) fn denied_sockets(identity: &VmIdentity) -> Vec<String> {
    // libvirt's domains' guest agents are asked through libvirt, never on their socket.
    let through_libvirt = matches!(
        Via::for_vm(identity, DEFAULT_LIBVIRT_URI),
        Some(Via::Libvirt { .. })
    );
    let guest_agent = (!through_libvirt).then_some(&identity.guest_agent_socket);
    std::iter::once(&identity.probe_channel)
        .chain(guest_agent)
        .flatten()
        .filter(|path| {
            let Ok(c_path) = std::ffi::CString::new(path.as_bytes()) else {
                return false;
            };
            // SAFETY: faccessat only reads the NUL-terminated path we own.
            let denied = unsafe {
                libc::faccessat(
                    libc::AT_FDCWD,
                    c_path.as_ptr(),
                    libc::W_OK,
                    libc::AT_EACCESS,
                )
            } != 0;
            denied && std::io::Error::last_os_error().kind() == std::io::ErrorKind::PermissionDenied
        })
        .cloned()
        .collect()
}
