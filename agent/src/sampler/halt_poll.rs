//! The host CPU KVM spends halt-polling a VM's vCPUs, from KVM's debugfs: each VM has a
//! directory `<pid>-<fd>` (its process and the descriptor of its VM, as `virt/kvm/kvm_main.c`
//! names it) holding its vCPUs' statistics summed, among them `halt_poll_success_ns` and
//! `halt_poll_fail_ns` (Linux 5.8 and later): the time spent polling before a wake-up came, and
//! polling in vain. debugfs is root's alone by default: where the files cannot be read the
//! polling is inferred, and the agent says so as a blind spot.

use std::path::{Path, PathBuf};

/// Where debugfs is mounted on a usual host.
pub const DEFAULT_DEBUGFS: &str = "/sys/kernel/debug";

/// The files whose sum is the time spent polling, in nanoseconds.
const POLL_FILES: [&str; 2] = ["halt_poll_success_ns", "halt_poll_fail_ns"];

/// The directory of one VM's statistics.
pub(super) fn vm_dir(debugfs: &Path, pid: u32, kvm_vm_fd: u32) -> PathBuf {
    debugfs.join(format!("kvm/{pid}-{kvm_vm_fd}"))
}

/// The time KVM has spent halt-polling the VM's vCPUs so far, in nanoseconds; `None` when the
/// files cannot be read (no permission, an older kernel, no debugfs).
pub(super) fn polled_ns(dir: &Path) -> Option<u64> {
    POLL_FILES.iter().try_fold(0u64, |sum, file| {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        Some(sum.saturating_add(text.trim().parse::<u64>().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_is_the_sum_of_both_counters_and_nothing_when_one_is_missing() {
        let debugfs = tempfile::tempdir().unwrap();
        let dir = vm_dir(debugfs.path(), 4242, 12);
        assert!(dir.ends_with("kvm/4242-12"));
        assert_eq!(polled_ns(&dir), None, "no directory");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("halt_poll_success_ns"), "1500000\n").unwrap();
        assert_eq!(
            polled_ns(&dir),
            None,
            "an older kernel has only part of them"
        );
        std::fs::write(dir.join("halt_poll_fail_ns"), "250000\n").unwrap();
        assert_eq!(polled_ns(&dir), Some(1_750_000));
        std::fs::write(dir.join("halt_poll_fail_ns"), "garbage\n").unwrap();
        assert_eq!(polled_ns(&dir), None);
    }
}
