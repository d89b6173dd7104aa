//! The guest probe: what a Linux guest can say about its own kernel timer setup.
//!
//! Runs inside the VM (`tickscope-agent guest`). Reads a few files under `/proc`, `/sys`, `/etc`
//! and `/boot`, twice about a second apart for the rates. Without root, `/proc/timer_list` and the
//! DMI UUID are unreadable: those facts are then missing, not guessed.

pub mod counters;
pub mod kconfig;
pub mod os_release;
pub mod timer_list;

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::clock::unix_ms;
use crate::wire::{Dynticks, GuestFacts, KernelConfig};

/// Reads a guest's facts from a root directory (`/` in a real guest, a fixture in tests).
pub struct Probe {
    root: PathBuf,
    /// `/proc/stat` CPU times at the previous collection, and when it was: the idle fraction
    /// is measured over the whole time since, not over one second.
    last_cpu: Option<(Instant, (u64, u64))>,
}

/// The parts of the facts that are rates: read at the start and the end of the measurement.
struct Snapshot {
    at: Instant,
    timer_list: Option<timer_list::TimerList>,
    cpu: Option<(u64, u64)>,
    loc: Option<(u64, u32)>,
}

impl Probe {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Probe {
            root: root.into(),
            last_cpu: None,
        }
    }

    fn read(&self, path: &str) -> Option<String> {
        let text = fs::read_to_string(self.root.join(path.trim_start_matches('/'))).ok()?;
        Some(text.trim_end_matches('\n').to_string())
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            timer_list: self.read("proc/timer_list").map(|t| timer_list::parse(&t)),
            cpu: self
                .read("proc/stat")
                .and_then(|t| counters::cpu_idle_and_total(&t)),
            loc: self
                .read("proc/interrupts")
                .and_then(|t| counters::local_timer_interrupts(&t)),
        }
    }

    /// The kernel build configuration: `/proc/config.gz` when the kernel carries it, else
    /// `/boot/config-<release>`, else unknown.
    fn kernel_config(&self, release: Option<&str>) -> KernelConfig {
        let gz = self.root.join("proc/config.gz");
        if let Ok(file) = fs::File::open(gz) {
            let mut text = String::new();
            if flate2::read::GzDecoder::new(file)
                .take(16 * 1024 * 1024)
                .read_to_string(&mut text)
                .is_ok()
            {
                return kconfig::parse(&text, "proc_config_gz");
            }
        }
        if let Some(text) = release.and_then(|r| self.read(&format!("boot/config-{r}"))) {
            return kconfig::parse(&text, "boot_config");
        }
        KernelConfig {
            source: "unknown".into(),
            ..KernelConfig::default()
        }
    }

    /// Collects every fact, measuring the rates over `measure` (about a second is enough to
    /// count a tick rate to within 1 %); the idle fraction covers the time since the previous
    /// collection when there was one, so a busy second does not make an idle guest look busy.
    pub fn collect(&mut self, measure: Duration) -> GuestFacts {
        let before = self.snapshot();
        std::thread::sleep(measure);
        let after = self.snapshot();
        let elapsed_s = after.at.duration_since(before.at).as_secs_f64();

        let kernel_release = self.read("proc/sys/kernel/osrelease");
        let (distro_id, distro_version_id, distro_name) = self
            .read("etc/os-release")
            .or_else(|| self.read("usr/lib/os-release"))
            .map(|t| os_release::parse(&t))
            .unwrap_or_default();
        let measured_hz = match (&before.timer_list, &after.timer_list) {
            (Some(b), Some(a)) => timer_list::measured_hz(b, a),
            _ => None,
        };
        let idle_since = self.last_cpu.or(before.cpu.map(|cpu| (before.at, cpu)));
        self.last_cpu = after.cpu.map(|cpu| (after.at, cpu));
        let (idle_fraction, idle_measured_s) = match (idle_since, after.cpu) {
            (Some((since, (idle0, total0))), Some((idle1, total1))) if total1 > total0 => (
                Some(idle1.saturating_sub(idle0) as f64 / (total1 - total0) as f64),
                Some(after.at.duration_since(since).as_secs_f64()),
            ),
            _ => (None, None),
        };
        let local_timer_irqs_per_cpu_s = match (before.loc, after.loc) {
            (Some((loc0, cpus)), Some((loc1, _))) if elapsed_s > 0.0 => {
                Some(loc1.saturating_sub(loc0) as f64 / f64::from(cpus) / elapsed_s)
            }
            _ => None,
        };
        let cpus = after.loc.map(|(_, cpus)| cpus).or_else(|| {
            self.read("sys/devices/system/cpu/online")
                .and_then(|r| count_cpus(&r))
        });
        let cpuidle = "sys/devices/system/cpu/cpuidle";
        GuestFacts {
            collected_ms: Some(unix_ms(SystemTime::now())),
            config: self.kernel_config(kernel_release.as_deref()),
            kernel_version: self.read("proc/sys/kernel/version"),
            kernel_release,
            distro_id,
            distro_version_id,
            distro_name,
            measured_hz,
            tick_device: after
                .timer_list
                .as_ref()
                .and_then(|t| t.tick_device.clone()),
            dynticks: after.timer_list.map(|t| Dynticks {
                nohz_mode: t.nohz_mode,
                tick_stopped_cpus: t.tick_stopped_cpus,
            }),
            cmdline: self.read("proc/cmdline"),
            clocksource: self
                .read("sys/devices/system/clocksource/clocksource0/current_clocksource"),
            available_clocksources: self
                .read("sys/devices/system/clocksource/clocksource0/available_clocksource")
                .map(|t| t.split_whitespace().map(str::to_string).collect()),
            cpuidle_driver: self.read(&format!("{cpuidle}/current_driver")),
            cpuidle_governor: self
                .read(&format!("{cpuidle}/current_governor_ro"))
                .or_else(|| self.read(&format!("{cpuidle}/current_governor"))),
            idle_fraction,
            idle_measured_s,
            local_timer_irqs_per_cpu_s,
            cpus,
            dmi_uuid: self.read("sys/class/dmi/id/product_uuid"),
        }
        .cleaned()
    }
}

/// CPUs in a range list such as `0-3,6`.
fn count_cpus(list: &str) -> Option<u32> {
    list.trim()
        .split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => Some(b.parse::<u32>().ok()?.checked_sub(a.parse().ok()?)? + 1),
            None => part.parse::<u32>().ok().map(|_| 1),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpus("0-3,6\n"), Some(5));
        assert_eq!(count_cpus("0"), Some(1));
        assert_eq!(count_cpus("3-1"), None);
    }
}
