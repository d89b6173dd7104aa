//! What the agent cannot see on its host, and how to let it see.
//!
//! An agent without the access it needs does not fail: it measures less (no accelerator, no
//! libvirt channels, no guest agents) and says nothing. So the sampler keeps track of what it
//! could not read, these functions turn that into blind spots with their fix, and every report
//! carries them to the server, where the host's page lists them.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::guest_agent::command::run_capturing;
use crate::wire::{
    BlindSpot, BlindSpotCheck, MAX_BLIND_SPOT_TEXT_CHARS, MAX_NAME_CHARS, clean_text,
};

/// What one cycle found it could not read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `/proc` is mounted with `hidepid=` and the agent does not see process 1.
    pub proc_hidden: bool,
    /// VM processes whose `/proc/<pid>/fd` could not be listed, and one of their names.
    pub vm_fds_unreadable: usize,
    pub vm_fds_example: Option<String>,
    /// Probe or guest agent sockets the agent may not connect to, and one of them.
    pub channels_denied: usize,
    pub channel_example: Option<String>,
    /// libvirt domains present, and why libvirt could not be reached, if it could not.
    pub libvirt_domains: usize,
    pub libvirt_error: Option<String>,
    pub libvirt_uri: String,
    /// KVM VMs whose halt-polling counters could not be read, and one of their names.
    pub halt_poll_unreadable: usize,
    pub halt_poll_example: Option<String>,
    /// VMs that hold a vhost device whose workers are not threads of theirs (kernel threads,
    /// before Linux 6.4), and one of their names.
    pub vhost_outside: usize,
    pub vhost_example: Option<String>,
}

/// " (e.g. \"NAME\")", quoted with escapes, for a name or path from a VM; empty without one.
fn example(what: Option<&str>) -> String {
    what.map_or(String::new(), |w| format!(" (e.g. {w:?})"))
}

fn text(s: String) -> String {
    clean_text(&s, MAX_BLIND_SPOT_TEXT_CHARS)
}

/// The blind spots in what one cycle saw, in a fixed order.
pub fn blind_spots(seen: &Seen) -> Vec<BlindSpot> {
    let mut spots = Vec::new();
    if seen.proc_hidden {
        spots.push(BlindSpot {
            check: BlindSpotCheck::ProcHidden,
            detail: "/proc is mounted with hidepid=: the processes of other users, the VMs among them, are hidden from the agent.".into(),
            fix: "Run the agent with CAP_SYS_PTRACE (the packaged unit grants it), or add its user to the group named by the gid= option of /proc's mount.".into(),
        });
    }
    if seen.vm_fds_unreadable > 0 {
        let example = example(seen.vm_fds_example.as_deref());
        spots.push(BlindSpot {
            check: BlindSpotCheck::VmFds,
            detail: text(format!(
                "The descriptors (/proc/<pid>/fd) of {} VM process(es){example} cannot be read: whether they run on KVM is unknown, so KVM's halt polling is never judged, and probe or guest agent channels that libvirt passes as descriptors are not found.",
                seen.vm_fds_unreadable
            )),
            fix: "Give the agent both CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (AmbientCapabilities= in the packaged unit; one alone is not enough), or run it as root.".into(),
        });
    }
    if seen.channels_denied > 0 {
        let example = example(seen.channel_example.as_deref());
        spots.push(BlindSpot {
            check: BlindSpotCheck::ChannelAccess,
            detail: text(format!(
                "{} probe or guest agent socket(s){example} refuse the agent (permission denied): those guests' facts are not read.",
                seen.channels_denied
            )),
            fix: "Add the agent's user to the group that owns the sockets (Debian's libvirt: `adduser tickscope-agent kvm` and `adduser tickscope-agent libvirt-qemu`), then restart the agent; sockets only root may open (Proxmox's) stay closed to it: run the guest probe with a guest token there instead.".into(),
        });
    }
    if let (Some(error), true) = (&seen.libvirt_error, seen.libvirt_domains > 0) {
        spots.push(BlindSpot {
            check: BlindSpotCheck::Libvirt,
            detail: text(format!(
                "libvirt at {} cannot be reached ({error}): the guest agents of {} libvirt domain(s) are not asked.",
                seen.libvirt_uri, seen.libvirt_domains
            )),
            fix: "Add the agent's user to the libvirt group (`adduser tickscope-agent libvirt`) and restart it, or set --libvirt-uri (TICKSCOPE_LIBVIRT_URI) to a libvirt it can reach.".into(),
        });
    }
    if seen.halt_poll_unreadable > 0 {
        let example = example(seen.halt_poll_example.as_deref());
        spots.push(BlindSpot {
            check: BlindSpotCheck::HaltPollCounters,
            detail: text(format!(
                "KVM's halt-polling counters of {} VM(s){example} (debugfs, /sys/kernel/debug/kvm/<pid>-<fd>/halt_poll_*_ns) cannot be read: the host CPU KVM spends polling for their vCPUs is inferred from their cost per wake-up, not measured.",
                seen.halt_poll_unreadable
            )),
            fix: "debugfs is root's alone by default. To let the agent read it, mount it for the agent's group (`mount -o remount,gid=tickscope-agent,mode=0750 /sys/kernel/debug`, which also shows it the rest of debugfs), or leave halt polling to the inference. Kernels before 5.8 do not count it.".into(),
        });
    }
    if seen.vhost_outside > 0 {
        let example = example(seen.vhost_example.as_deref());
        spots.push(BlindSpot {
            check: BlindSpotCheck::VhostWorkers,
            detail: text(format!(
                "{} VM(s){example} use vhost, whose workers on this kernel are kernel threads (vhost-<pid>) outside the VM process: their CPU is not counted in the VM's, and the VMs' split has no vhost part.",
                seen.vhost_outside
            )),
            fix: "Nothing the agent's access changes: from Linux 6.4 vhost workers are threads of the VM process and are counted. Until then, `ps -eLo pid,comm,time | grep vhost-` on the host shows their CPU.".into(),
        });
    }
    spots
}

/// Whether `/proc` hides other users' processes from this agent: mounted with `hidepid=` other
/// than 0, and process 1 not visible.
pub fn proc_hidden(proc_root: &Path) -> bool {
    let Ok(mountinfo) = std::fs::read_to_string(proc_root.join("self/mountinfo")) else {
        return false;
    };
    hidepid_in(&mountinfo, proc_root) && !proc_root.join("1").exists()
}

/// Whether the mount of `proc_root` in a `mountinfo` table has `hidepid=` set to hide anything.
fn hidepid_in(mountinfo: &str, proc_root: &Path) -> bool {
    mountinfo.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let mount_point = fields.get(4).copied();
        let super_options = line.rsplit(' ').next().unwrap_or("");
        mount_point == proc_root.to_str()
            && super_options.split(',').any(|o| {
                o.strip_prefix("hidepid=")
                    .is_some_and(|v| v != "0" && v != "off")
            })
    })
}

/// Why libvirt at `uri` cannot be reached, or `None` if it answers (`virsh -c URI uri`).
pub fn libvirt_unreachable(uri: &str) -> Option<String> {
    let mut command = Command::new("virsh");
    command.args(["-q", "-c", uri, "uri"]).env("LC_ALL", "C");
    match run_capturing(command, Duration::from_secs(5)) {
        Ok(_) => None,
        Err(why) => Some(clean_text(&why, MAX_NAME_CHARS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thing_not_seen_becomes_one_blind_spot_with_its_fix() {
        assert!(blind_spots(&Seen::default()).is_empty());
        let seen = Seen {
            proc_hidden: true,
            vm_fds_unreadable: 3,
            vm_fds_example: Some("web\n01".into()),
            channels_denied: 1,
            channel_example: Some(
                "/var/lib/libvirt/qemu/channel/target/d/org.qemu.guest_agent.0".into(),
            ),
            libvirt_domains: 2,
            libvirt_error: Some("failed to connect to the hypervisor".into()),
            libvirt_uri: "qemu:///system".into(),
            halt_poll_unreadable: 2,
            halt_poll_example: Some("win-01".into()),
            vhost_outside: 1,
            vhost_example: Some("router".into()),
        };
        let spots = blind_spots(&seen);
        let checks: Vec<BlindSpotCheck> = spots.iter().map(|s| s.check).collect();
        assert_eq!(
            checks,
            [
                BlindSpotCheck::ProcHidden,
                BlindSpotCheck::VmFds,
                BlindSpotCheck::ChannelAccess,
                BlindSpotCheck::Libvirt,
                BlindSpotCheck::HaltPollCounters,
                BlindSpotCheck::VhostWorkers
            ]
        );
        assert!(
            spots[5].detail.starts_with("1 VM(s) (e.g. \"router\")"),
            "{}",
            spots[5].detail
        );
        assert!(
            spots[4].detail.contains("2 VM(s)") && spots[4].detail.contains("win-01"),
            "{}",
            spots[4].detail
        );
        assert!(
            spots[1].detail.contains("3 VM process(es)"),
            "{}",
            spots[1].detail
        );
        assert!(
            spots[1].detail.contains(r#""web\n01""#),
            "names are quoted, escapes and all"
        );
        assert!(
            spots
                .iter()
                .all(|s| !s.fix.is_empty() && !s.detail.chars().any(char::is_control))
        );
        // A libvirt that cannot be reached matters only where there are libvirt domains.
        let no_domains = Seen {
            libvirt_domains: 0,
            ..seen
        };
        assert!(
            blind_spots(&no_domains)
                .iter()
                .all(|s| s.check != BlindSpotCheck::Libvirt)
        );
    }

    #[test]
    fn hidepid_is_read_from_procs_own_mount() {
        let proc_root = Path::new("/proc");
        let hidden = "22 28 0:20 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw,hidepid=invisible\n";
        let hidden_numeric = "22 28 0:20 / /proc rw,relatime - proc proc rw,gid=27,hidepid=2\n";
        let open = "22 28 0:20 / /proc rw,relatime - proc proc rw\n";
        let zero = "22 28 0:20 / /proc rw,relatime - proc proc rw,hidepid=0\n";
        let elsewhere = "40 28 0:20 / /srv/proc rw - proc proc rw,hidepid=2\n";
        assert!(hidepid_in(hidden, proc_root));
        assert!(hidepid_in(hidden_numeric, proc_root));
        assert!(!hidepid_in(open, proc_root));
        assert!(!hidepid_in(zero, proc_root));
        assert!(!hidepid_in(elsewhere, proc_root));
    }

    #[test]
    fn an_unreachable_libvirt_says_why() {
        // No libvirt listens at this URI (or virsh is not installed): either way, a reason.
        let why = libvirt_unreachable("qemu+unix:///system?socket=/nonexistent/tickscope.sock");
        assert!(why.is_some_and(|w| !w.is_empty()));
    }
}
