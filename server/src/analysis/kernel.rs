//! What the guest's own facts say about its tick, distilled for the analysis.

use serde::Serialize;
use tickscope_wire::GuestFacts;

use super::boot_args;

/// Boot parameters that change how a kernel ticks, idles or keeps time.
pub const TIMER_BOOT_PARAMS: [&str; 10] = [
    "nohz",
    "nohz_full",
    "idle",
    "highres",
    "divider",
    "clocksource",
    "clock",
    "nolapic_timer",
    "nolapic",
    "disableapic",
];

/// Which NO_HZ mode the kernel was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NohzBuilt {
    /// CONFIG_NO_HZ_FULL (also stops the tick on idle CPUs).
    Full,
    /// CONFIG_NO_HZ_IDLE.
    Idle,
    /// CONFIG_NO_HZ, before 3.10.
    Legacy,
    /// None of them: the kernel ticks periodically whatever its command line says.
    None,
    /// The build configuration could not be read.
    Unknown,
}

impl NohzBuilt {
    pub fn as_str(self) -> &'static str {
        match self {
            NohzBuilt::Full => "full",
            NohzBuilt::Idle => "idle",
            NohzBuilt::Legacy => "legacy",
            NohzBuilt::None => "none",
            NohzBuilt::Unknown => "unknown",
        }
    }

    pub fn config_name(self) -> &'static str {
        match self {
            NohzBuilt::Full => "NO_HZ_FULL",
            NohzBuilt::Idle => "NO_HZ_IDLE",
            NohzBuilt::Legacy => "NO_HZ",
            NohzBuilt::None => "no NO_HZ option",
            NohzBuilt::Unknown => "unknown NO_HZ options",
        }
    }

    pub fn can_stop_the_tick(self) -> Option<bool> {
        match self {
            NohzBuilt::Full | NohzBuilt::Idle | NohzBuilt::Legacy => Some(true),
            NohzBuilt::None => Some(false),
            NohzBuilt::Unknown => None,
        }
    }
}

/// The facts the analysis uses, from the best source a guest has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelFacts {
    pub source: String,
    /// Seconds since the facts were received.
    pub age_s: f64,
    pub kernel_release: Option<String>,
    pub distro: Option<String>,
    /// The OS's id as the guest gave it (`/etc/os-release` ID, or the guest agent's `id`:
    /// `mswindows` for Windows).
    pub os_id: Option<String>,
    pub config_hz: Option<u32>,
    pub nohz: NohzBuilt,
    pub measured_hz: Option<f64>,
    /// Whether any CPU had dynticks active (`.nohz_mode` > 0) when read.
    pub dynticks_active: Option<bool>,
    pub cmdline: Option<String>,
    pub idle_fraction: Option<f64>,
    pub clocksource: Option<String>,
    pub available_clocksources: Vec<String>,
    pub cpuidle_driver: Option<String>,
    /// The clock event device of CPU 0's tick (`lapic-deadline`, `pit`, `hpet`, ...).
    pub tick_device: Option<String>,
}

impl KernelFacts {
    pub fn new(facts: &GuestFacts, source: &str, age_s: f64) -> Self {
        let c = &facts.config;
        let nohz = if c.source.is_empty() || c.source == "unknown" {
            NohzBuilt::Unknown
        } else if c.no_hz_full == Some(true) {
            NohzBuilt::Full
        } else if c.no_hz_idle == Some(true) {
            NohzBuilt::Idle
        } else if c.no_hz_legacy == Some(true) {
            NohzBuilt::Legacy
        } else {
            NohzBuilt::None
        };
        KernelFacts {
            source: source.to_string(),
            age_s,
            kernel_release: facts.kernel_release.clone(),
            distro: facts
                .distro_name
                .clone()
                .or_else(|| facts.distro_id.clone()),
            os_id: facts.distro_id.clone(),
            config_hz: c.hz,
            nohz,
            measured_hz: facts.measured_hz,
            dynticks_active: facts
                .dynticks
                .as_ref()
                .filter(|d| !d.nohz_mode.is_empty())
                .map(|d| d.nohz_mode.iter().any(|&m| m > 0)),
            cmdline: facts.cmdline.clone(),
            idle_fraction: facts.idle_fraction,
            clocksource: facts.clocksource.clone(),
            available_clocksources: facts.available_clocksources.clone().unwrap_or_default(),
            cpuidle_driver: facts.cpuidle_driver.clone(),
            tick_device: facts.tick_device.clone(),
        }
    }

    /// The facts with the command line the host sees (a directly booted kernel's, which the
    /// host reads from the VM process every interval): when it differs from the one the guest
    /// reported, the guest was booted again since, and the host's is the current one.
    pub fn with_host_seen_cmdline(mut self, host_seen: Option<&str>) -> Self {
        if let Some(cmdline) = host_seen {
            self.cmdline = Some(cmdline.to_string());
        }
        self
    }

    /// The tick's clock event device when the hypervisor emulates it (the PIT, an HPET
    /// channel) rather than the local APIC timer.
    pub fn emulated_tick_device(&self) -> Option<&str> {
        self.tick_device
            .as_deref()
            .filter(|d| *d == "pit" || d.starts_with("hpet"))
    }

    /// The timer-related parameters on the command line, as written (`nohz=off`, `idle=poll`).
    pub fn cmdline_flags(&self) -> Vec<String> {
        self.cmdline
            .as_deref()
            .map(|c| {
                c.split_ascii_whitespace()
                    .filter(|w| {
                        let key = w.split_once('=').map_or(*w, |(k, _)| k);
                        TIMER_BOOT_PARAMS.contains(&key)
                    })
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the kernel cannot stop its tick: its configuration says it was built without
    /// NO_HZ, or, where the configuration could not be read, the kernel reports the tick
    /// running on every CPU (dynticks off) while nothing on its command line asks for that.
    pub fn built_without_nohz(&self) -> bool {
        match self.nohz {
            NohzBuilt::None => true,
            // A clocksource that cannot drive one-shot timers (jiffies, pit) also keeps the
            // tick running on a NO_HZ kernel: that says nothing of its build.
            NohzBuilt::Unknown => {
                self.dynticks_active == Some(false)
                    && !self.has_param("nohz", "off")
                    && !matches!(self.clocksource.as_deref(), Some("jiffies" | "pit"))
            }
            NohzBuilt::Idle | NohzBuilt::Full | NohzBuilt::Legacy => false,
        }
    }

    pub fn has_param(&self, key: &str, value: &str) -> bool {
        boot_args::has(self.cmdline.as_deref(), key, value)
    }

    /// The kernel's version numbers, from its release (`2.6.18-398.el5` → 2.6.18).
    pub fn version(&self) -> Option<(u32, u32, u32)> {
        kernel_version(self.kernel_release.as_deref()?)
    }
}

/// Major, minor and patch level of a kernel release string (`6.1.0-57-cloud-amd64` → 6.1.0).
pub fn kernel_version(release: &str) -> Option<(u32, u32, u32)> {
    let numbers = release.split(['-', '+', '_', ' ']).next()?;
    let mut parts = numbers.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The build number of a RHEL/CentOS 5 kernel (`2.6.18-308.el5` → 308): which 5.x point
/// release it belongs to (5.3 is 128, 5.8 is 308, 5.11 is 398).
pub fn rhel5_build(release: &str) -> Option<u32> {
    let rest = release.strip_prefix("2.6.18-")?;
    if !rest.contains("el5") {
        return None;
    }
    rest.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickscope_wire::{Dynticks, KernelConfig};

    fn facts(config: KernelConfig, cmdline: &str, modes: &[u32]) -> GuestFacts {
        GuestFacts {
            config,
            cmdline: Some(cmdline.into()),
            dynticks: Some(Dynticks {
                nohz_mode: modes.to_vec(),
                tick_stopped_cpus: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn nohz_build_mode_from_the_config() {
        let config = |full, idle, legacy, source: &str| KernelConfig {
            source: source.into(),
            hz: Some(250),
            no_hz_full: full,
            no_hz_idle: idle,
            no_hz_legacy: legacy,
            hz_periodic: None,
        };
        let cases = [
            (
                config(Some(true), Some(false), Some(false), "boot_config"),
                NohzBuilt::Full,
            ),
            (
                config(Some(false), Some(true), None, "boot_config"),
                NohzBuilt::Idle,
            ),
            (
                config(None, None, Some(true), "proc_config_gz"),
                NohzBuilt::Legacy,
            ),
            (config(None, None, None, "boot_config"), NohzBuilt::None),
            (config(None, None, None, "unknown"), NohzBuilt::Unknown),
        ];
        for (c, expected) in cases {
            assert_eq!(
                KernelFacts::new(&facts(c.clone(), "", &[]), "probe_channel", 0.0).nohz,
                expected,
                "{c:?}"
            );
        }
    }

    #[test]
    fn kernel_versions_and_rhel5_builds() {
        let cases = [
            ("6.1.0-57-cloud-amd64", Some((6, 1, 0)), None),
            ("2.6.18-398.el5", Some((2, 6, 18)), Some(398)),
            ("2.6.18-128.el5PAE", Some((2, 6, 18)), Some(128)),
            ("2.6.32-754.el6.x86_64", Some((2, 6, 32)), None),
            ("3.10", Some((3, 10, 0)), None),
            ("5.15.0-91-generic", Some((5, 15, 0)), None),
            ("garbage", None, None),
        ];
        for (release, version, build) in cases {
            assert_eq!(kernel_version(release), version, "{release}");
            assert_eq!(rhel5_build(release), build, "{release}");
        }
    }

    #[test]
    fn timer_flags_are_picked_from_the_command_line() {
        let k = KernelFacts::new(
            &facts(
                KernelConfig::default(),
                "ro quiet nohz=off idle=poll root=/dev/vda1 nohz_full=1-3 clocksource=hpet",
                &[0, 2],
            ),
            "probe_channel",
            0.0,
        );
        assert_eq!(
            k.cmdline_flags(),
            ["nohz=off", "idle=poll", "nohz_full=1-3", "clocksource=hpet"]
        );
        assert_eq!(k.dynticks_active, Some(true));
        assert!(k.has_param("nohz", "off"));
    }
}
