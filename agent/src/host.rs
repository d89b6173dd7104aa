//! Facts about the hypervisor host itself, read once per report.

use std::fs;
use std::path::Path;

use crate::wire::{AgentInfo, HostInfo, MAX_NAME_CHARS, clean_text};

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The host as the report describes it. `name_override` is `--host-name`.
pub fn host_info(name_override: Option<&str>) -> HostInfo {
    HostInfo {
        name: clean_text(
            &name_override
                .map(str::to_string)
                .or_else(|| read_trimmed("/proc/sys/kernel/hostname"))
                .unwrap_or_else(|| "unknown-host".into()),
            MAX_NAME_CHARS,
        ),
        cpus: online_cpus(),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        kvm_halt_poll_ns: read_trimmed("/sys/module/kvm/parameters/halt_poll_ns")
            .and_then(|v| v.parse().ok()),
        boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        // The sampler's, filled in with the report.
        blind_spots: Vec::new(),
    }
}

/// This agent's identity: the host's machine id, and a fresh run id for this process.
pub fn agent_info() -> AgentInfo {
    AgentInfo {
        id: read_trimmed("/etc/machine-id")
            .or_else(|| read_trimmed("/var/lib/dbus/machine-id"))
            .or_else(|| read_trimmed("/proc/sys/kernel/hostname"))
            .unwrap_or_else(|| "unknown".into()),
        // The kernel hands out a random UUID per read: no RNG crate needed.
        run_id: read_trimmed("/proc/sys/kernel/random/uuid")
            .unwrap_or_else(|| format!("pid-{}-{}", std::process::id(), now_nanos())),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Clock ticks per second of `/proc/<pid>/stat` CPU times (`USER_HZ`).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(100)
}
