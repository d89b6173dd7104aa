//! What a guest says about its own kernel timer setup: reported by the guest probe
//! (`tickscope-agent guest`), or in part by a guest agent (qemu-guest-agent, VirtualBox guest
//! properties). Every field is optional: `None` means the channel could not tell, never a guess.
//! Everything here comes from inside a VM and is hostile until the server has validated it.

use serde::{Deserialize, Serialize};

use crate::limits::{
    MAX_BOOT_ARGS_CHARS, MAX_LABEL_CHARS, MAX_NAME_CHARS, clean_text, normalise_uuid,
};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct GuestFacts {
    /// Unix time in milliseconds when the facts were collected, on the guest's clock.
    pub collected_ms: Option<i64>,
    /// `uname -r`.
    pub kernel_release: Option<String>,
    /// `uname -v`.
    pub kernel_version: Option<String>,
    /// `/etc/os-release` ID, VERSION_ID and PRETTY_NAME.
    pub distro_id: Option<String>,
    pub distro_version_id: Option<String>,
    pub distro_name: Option<String>,
    pub config: KernelConfig,
    /// The kernel's tick rate measured from the jiffies counter over about a second, in Hz.
    pub measured_hz: Option<f64>,
    /// Dynticks state from `/proc/timer_list`.
    pub dynticks: Option<Dynticks>,
    /// The kernel command line (`/proc/cmdline`).
    pub cmdline: Option<String>,
    /// The current clocksource and the ones available.
    pub clocksource: Option<String>,
    pub available_clocksources: Option<Vec<String>>,
    /// The clock event device that drives CPU 0's tick (`lapic-deadline`, `lapic`, `hpet`,
    /// `pit`, ...), from `/proc/timer_list`: an emulated one traps to the hypervisor on every
    /// tick it is programmed for.
    pub tick_device: Option<String>,
    /// cpuidle driver (`haltpoll`, `intel_idle`, `none`, ...) and governor.
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    /// Fraction of CPU time the guest spent idle over the measurement, 0 to 1 (`/proc/stat`).
    pub idle_fraction: Option<f64>,
    /// Seconds of guest time `idle_fraction` was measured over (the time since the probe's
    /// previous collection), so the server knows which of its samples the reading covers.
    #[serde(default)]
    pub idle_measured_s: Option<f64>,
    /// Local timer interrupts (`LOC` in `/proc/interrupts`) per CPU per second.
    pub local_timer_irqs_per_cpu_s: Option<f64>,
    /// Online CPUs the guest sees.
    pub cpus: Option<u32>,
    /// `/sys/class/dmi/id/product_uuid`, to join the facts to the host's view of the VM.
    pub dmi_uuid: Option<String>,
}

/// The timer options the kernel was built with. `None` where the build configuration could not
/// be read, or did not mention the option.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct KernelConfig {
    /// Where it was read: `proc_config_gz`, `boot_config`, or `unknown`.
    pub source: String,
    pub hz: Option<u32>,
    pub hz_periodic: Option<bool>,
    pub no_hz_idle: Option<bool>,
    pub no_hz_full: Option<bool>,
    /// CONFIG_NO_HZ, the option before 3.10 (and a compatibility alias after).
    pub no_hz_legacy: Option<bool>,
}

/// Per-CPU tick state from `/proc/timer_list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Dynticks {
    /// `.nohz_mode` of each CPU: 0 inactive (periodic tick), 1 low-res, 2 high-res dynticks.
    pub nohz_mode: Vec<u32>,
    /// CPUs whose tick was stopped when read.
    pub tick_stopped_cpus: u32,
}

/// How facts reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FactsSource {
    /// The guest probe, through a serial or virtio-serial channel read by the host agent.
    ProbeChannel,
    /// The guest probe, posting straight to the server with a guest token.
    ProbeDirect,
    /// qemu-guest-agent's `guest-get-osinfo`, asked by the host agent.
    QemuGuestAgent,
    /// VirtualBox guest properties (`/VirtualBox/GuestInfo/OS/*`), asked by the host agent.
    VirtualboxProperties,
    #[serde(other)]
    Other,
}

impl FactsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FactsSource::ProbeChannel => "probe_channel",
            FactsSource::ProbeDirect => "probe_direct",
            FactsSource::QemuGuestAgent => "qemu_guest_agent",
            FactsSource::VirtualboxProperties => "virtualbox_properties",
            FactsSource::Other => "other",
        }
    }

    /// The source named by [`FactsSource::as_str`]; `Other` for any other name. Read by the
    /// wire format's own names (serde), so that no second list of the sources can miss one.
    pub fn from_name(name: &str) -> FactsSource {
        use serde::de::IntoDeserializer;
        let name: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            name.into_deserializer();
        FactsSource::deserialize(name).unwrap_or(FactsSource::Other)
    }
}

/// Facts as a host agent forwards them inside its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveredFacts {
    pub source: FactsSource,
    /// Unix time in milliseconds when the host agent received them.
    pub received_ms: i64,
    pub facts: GuestFacts,
}

/// Most CPUs a guest may claim, and list entries it may send.
const MAX_LIST: usize = 4096;

impl GuestFacts {
    /// The facts with every string cleaned and cut, every number sane and every list bounded:
    /// what a host agent forwards, so one guest's garbage cannot get its host's report refused.
    pub fn cleaned(self) -> GuestFacts {
        let name = |s: Option<String>| s.map(|s| clean_text(&s, MAX_NAME_CHARS));
        let label = |s: Option<String>| s.map(|s| clean_text(&s, MAX_LABEL_CHARS));
        let finite =
            |v: Option<f64>, max: f64| v.filter(|v| v.is_finite() && (0.0..=max).contains(v));
        GuestFacts {
            collected_ms: self.collected_ms,
            kernel_release: name(self.kernel_release),
            kernel_version: name(self.kernel_version),
            distro_id: label(self.distro_id),
            distro_version_id: label(self.distro_version_id),
            distro_name: name(self.distro_name),
            config: KernelConfig {
                source: clean_text(&self.config.source, MAX_LABEL_CHARS),
                hz: self.config.hz.filter(|hz| (1..=100_000).contains(hz)),
                ..self.config
            },
            measured_hz: finite(self.measured_hz, 100_000.0),
            // .nohz_mode is 0, 1 or 2, one per CPU.
            dynticks: self.dynticks.map(|d| Dynticks {
                nohz_mode: d
                    .nohz_mode
                    .into_iter()
                    .filter(|&m| m <= 2)
                    .take(MAX_LIST)
                    .collect(),
                tick_stopped_cpus: d.tick_stopped_cpus.min(MAX_LIST as u32),
            }),
            cmdline: self.cmdline.map(|c| clean_text(&c, MAX_BOOT_ARGS_CHARS)),
            clocksource: label(self.clocksource),
            available_clocksources: self.available_clocksources.map(|list| {
                list.into_iter()
                    .take(32)
                    .map(|c| clean_text(&c, MAX_LABEL_CHARS))
                    .collect()
            }),
            tick_device: label(self.tick_device),
            cpuidle_driver: label(self.cpuidle_driver),
            cpuidle_governor: label(self.cpuidle_governor),
            idle_fraction: finite(self.idle_fraction, 1.0),
            idle_measured_s: finite(self.idle_measured_s, 86_400.0),
            local_timer_irqs_per_cpu_s: finite(self.local_timer_irqs_per_cpu_s, 1_000_000.0),
            cpus: self.cpus.filter(|&n| (1..=MAX_LIST as u32).contains(&n)),
            dmi_uuid: self.dmi_uuid.and_then(|u| normalise_uuid(&u)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_read_back_from_its_name_and_an_unknown_name_is_other() {
        let cases = [
            (FactsSource::ProbeChannel, "probe_channel"),
            (FactsSource::ProbeDirect, "probe_direct"),
            (FactsSource::QemuGuestAgent, "qemu_guest_agent"),
            (FactsSource::VirtualboxProperties, "virtualbox_properties"),
            (FactsSource::Other, "other"),
        ];
        for (source, name) in cases {
            assert_eq!(source.as_str(), name);
            assert_eq!(FactsSource::from_name(name), source, "{name}");
        }
        assert_eq!(FactsSource::from_name("smoke_signals"), FactsSource::Other);
        assert_eq!(FactsSource::from_name(""), FactsSource::Other);
    }

    #[test]
    fn cleaning_drops_what_cannot_be_true_and_defangs_strings() {
        let facts = GuestFacts {
            kernel_release: Some("6.1.0\u{1b}[2J".into()),
            measured_hz: Some(f64::NAN),
            idle_fraction: Some(1.5),
            cpus: Some(0),
            dmi_uuid: Some("NOT-A-UUID".into()),
            config: KernelConfig {
                source: "boot_config".into(),
                hz: Some(0),
                no_hz_full: Some(true),
                ..Default::default()
            },
            ..Default::default()
        }
        .cleaned();
        assert_eq!(facts.kernel_release.as_deref(), Some("6.1.0\u{FFFD}[2J"));
        assert_eq!(facts.measured_hz, None);
        assert_eq!(facts.idle_fraction, None);
        assert_eq!(facts.cpus, None);
        assert_eq!(facts.dmi_uuid, None);
        assert_eq!(facts.config.hz, None);
        assert_eq!(facts.config.no_hz_full, Some(true));
    }

    #[test]
    fn facts_from_an_older_probe_with_fewer_fields_parse() {
        let facts: GuestFacts =
            serde_json::from_str(r#"{"kernel_release": "2.6.18-398.el5", "future": 1}"#).unwrap();
        assert_eq!(facts.kernel_release.as_deref(), Some("2.6.18-398.el5"));
        assert_eq!(facts.config.hz, None);
    }
}
