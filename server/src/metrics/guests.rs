//! The per-guest series, written as exposition text straight from the kept fleet.
//!
//! Not through `prometheus-client`: at 100,000 guests a scrape is over a million series, and the
//! crate writes each one's label set a label at a time, the key, `="`, the value checked for
//! characters to escape, `"`: 57 % of a scrape in a profile (docs/performance.md). Here each
//! guest's identity labels are escaped once a scrape, into one buffer, and a series is a handful
//! of appends. The text is byte for byte what `prometheus-client` writes, in either format (a
//! test below compares the two).

use std::ops::Range;

use crate::domain::GuestId;
use crate::fleet::AnalysedGuest;
use crate::fleet::published::Published;

use super::encoding::Out;
use super::format::Format;
use super::labels;
use crate::error::AppResult;

/// What one guest shows in one family; `None` from a [`Read`] when it has nothing there.
enum Sample {
    /// The info series: always 1, with the verdict and kernel labels.
    Info,
    Gauge(f64),
    Seconds(f64),
    Count(u64),
    /// One gauge per part of the VM, labelled `part`.
    Parts([(&'static str, f64); 4]),
}

/// A family's sample of a guest.
type Read = fn(&AnalysedGuest) -> Option<Sample>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
}

/// One per-guest family.
struct Family {
    /// Its name, with its unit's suffix when it has one (OpenMetrics wants both).
    name: &'static str,
    /// Its help text, without the full stop it is written with.
    help: &'static str,
    unit: Option<&'static str>,
    kind: Kind,
    read: Read,
}

impl Family {
    /// The name its samples are written under: a counter's ends in `_total`. The classic
    /// format's `# HELP` and `# TYPE` name it so too.
    fn series(&self) -> String {
        match self.kind {
            Kind::Gauge => self.name.to_string(),
            Kind::Counter => format!("{}_total", self.name),
        }
    }
}

/// The per-guest families, in the order they are written.
const FAMILIES: [Family; 9] = [
    Family {
        name: "tickscope_guest_info",
        help: "Always 1: the guest's tick mode as judged now, the confidence of that verdict, the cause of idle burn it is filed under, its OS and its platform's names where known, and what its kernel reported (release, distro, CONFIG_HZ, NO_HZ build, clocksource); join on guest_id",
        unit: None,
        kind: Kind::Gauge,
        read: |_| Some(Sample::Info),
    },
    Family {
        name: "tickscope_guest_cpu_cores",
        help: "Host CPU the guest used, averaged over the last 5 minutes, in cores (1 = one host core busy)",
        unit: None,
        kind: Kind::Gauge,
        read: |g| {
            g.verdict
                .rates
                .map(|r| Sample::Gauge(r.host_cpu_pct / 100.0))
        },
    },
    Family {
        name: "tickscope_guest_idle_cpu_cores",
        help: "Host CPU the guest's VM used while the guest idled, averaged over the last 5 minutes, in cores, by part: vcpus its vCPU threads, emulator QEMU's main loop and other threads, iothreads its I/O threads, vhost its vhost workers; only for VMs whose threads the agent could split",
        unit: None,
        kind: Kind::Gauge,
        read: |g| {
            g.verdict.split.map(|s| {
                Sample::Parts([
                    ("vcpus", s.vcpus_pct / 100.0),
                    ("emulator", s.emulator_pct / 100.0),
                    ("iothreads", s.iothreads_pct / 100.0),
                    ("vhost", s.vhost_pct / 100.0),
                ])
            })
        },
    },
    Family {
        name: "tickscope_guest_idle_halt_poll_cpu_cores",
        help: "Host CPU KVM spent halt-polling the guest's vCPUs while it idled, averaged over the last 5 minutes, in cores (KVM's own count, where the agent could read it)",
        unit: None,
        kind: Kind::Gauge,
        read: |g| {
            g.verdict
                .halt_poll_pct
                .map(|pct| Sample::Gauge(pct / 100.0))
        },
    },
    Family {
        name: "tickscope_guest_wasted_cpu_cores",
        help: "Host CPU the guest wastes ticking or polling while idle, in cores",
        unit: None,
        kind: Kind::Gauge,
        read: |g| Some(Sample::Gauge(g.wasted_cpu_pct() / 100.0)),
    },
    Family {
        name: "tickscope_guest_wakeups_per_vcpu_per_second",
        help: "vCPU thread wake-ups per vCPU per second, averaged over the last 5 minutes",
        unit: None,
        kind: Kind::Gauge,
        read: |g| g.verdict.rates.map(|r| Sample::Gauge(r.wakeups_per_vcpu_s)),
    },
    Family {
        name: "tickscope_guest_vcpus",
        help: "vCPUs of the guest",
        unit: None,
        kind: Kind::Gauge,
        read: |g| Some(Sample::Gauge(f64::from(g.vcpus))),
    },
    Family {
        name: "tickscope_guest_cpu_seconds",
        help: "Host CPU time the guest's VM process has used since it started, as its agent last reported it; starts again from 0 when the VM restarts, which rate() handles",
        unit: Some("seconds"),
        kind: Kind::Counter,
        read: |g| g.process_totals.map(|t| Sample::Seconds(t.cpu_s_total)),
    },
    Family {
        name: "tickscope_guest_vcpu_wakeups",
        help: "Wake-ups of the guest's vCPU threads (all its threads when they cannot be told apart) since its VM process started, as its agent last reported them; starts again from 0 when the VM restarts, which rate() handles",
        unit: None,
        kind: Kind::Counter,
        read: |g| {
            g.process_totals
                .map(|t| Sample::Count(u64::try_from(t.wakeups_total).unwrap_or(0)))
        },
    },
];

/// Adds the per-guest families of the guests active at `now_ms` to `out`, in `format`: every
/// family's guests in the order of their ids, so that two scrapes list them alike.
pub fn write(out: &mut Out, fleet: &Published, now_ms: i64, format: Format) -> AppResult<()> {
    // A walk of the guests' map, then a sort on the id beside each guest: walking the ranking
    // would look each guest up, all over memory (perf, docs/performance.md).
    let mut guests: Vec<(GuestId, &AnalysedGuest)> =
        fleet.active(now_ms).map(|g| (g.id, g.as_ref())).collect();
    guests.sort_unstable_by_key(|(id, _)| *id);

    // Every guest's identity labels, escaped once for all families (`guest="..",guest_id="..",..`),
    // one after another in one buffer; beside each guest, where its labels are in it.
    let mut identities = String::with_capacity(guests.len() * 96);
    let guests: Vec<(&AnalysedGuest, Range<usize>)> = guests
        .into_iter()
        .map(|(_, g)| {
            let start = identities.len();
            labels::identity(g, &mut |name, value| {
                if identities.len() > start {
                    identities.push(',');
                }
                push_label(&mut identities, name, value);
            });
            (g, start..identities.len())
        })
        .collect();

    let (mut float, mut integer) = (dtoa::Buffer::new(), itoa::Buffer::new());
    for family in &FAMILIES {
        write_descriptor(&mut out.text, family, format);
        let series = family.series();
        for (g, identity) in &guests {
            let identity = &identities[identity.clone()];
            let text = &mut out.text;
            match (family.read)(g) {
                None => {}
                Some(Sample::Info) => push_series(
                    text,
                    &series,
                    identity,
                    |out| {
                        labels::info(g, &mut |name, value| {
                            out.push(',');
                            push_label(out, name, value);
                        })
                    },
                    float.format(1.0),
                ),
                Some(Sample::Gauge(value) | Sample::Seconds(value)) => {
                    push_series(text, &series, identity, |_| {}, float.format(value))
                }
                Some(Sample::Count(value)) => {
                    push_series(text, &series, identity, |_| {}, integer.format(value))
                }
                Some(Sample::Parts(parts)) => {
                    for (part, value) in parts {
                        let part_label = |out: &mut String| {
                            out.push(',');
                            push_label(out, "part", part);
                        };
                        push_series(text, &series, identity, part_label, float.format(value));
                    }
                }
            }
            out.spill_if_full()?;
        }
    }
    Ok(())
}

/// One series: `series{identity,more} value`.
fn push_series(
    out: &mut String,
    series: &str,
    identity: &str,
    more: impl FnOnce(&mut String),
    value: &str,
) {
    out.push_str(series);
    out.push('{');
    out.push_str(identity);
    more(out);
    out.push_str("} ");
    out.push_str(value);
    out.push('\n');
}

/// `name="value"`, the value escaped.
fn push_label(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push_str("=\"");
    labels::push_value(out, value);
    out.push('"');
}

/// A family's `# HELP` and `# TYPE` lines, and in OpenMetrics its `# UNIT` line; the classic
/// format names a counter by its `_total` series and has no unit line.
fn write_descriptor(out: &mut String, family: &Family, format: Format) {
    let kind = match family.kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
    };
    let name = match format {
        Format::OpenMetrics => family.name.to_string(),
        Format::Classic => family.series(),
    };
    out.push_str(&format!("# HELP {name} {}.\n", family.help));
    out.push_str(&format!("# TYPE {name} {kind}\n"));
    if let (Format::OpenMetrics, Some(unit)) = (format, family.unit) {
        out.push_str(&format!("# UNIT {name} {unit}\n"));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::MetricType;
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::{Registry, Unit};

    use super::*;
    use crate::analysis::kernel::KernelFacts;
    use crate::analysis::test_window;
    use crate::analysis::window::CpuSplit;
    use crate::db::ProcessTotals;
    use crate::fleet::ACTIVE_WITHIN_MS;
    use crate::metrics::encoding::Encoding;
    use crate::metrics::format::to_classic;
    use crate::visible::show_invisible;

    /// The per-guest families as `prometheus-client` writes them: each guest's label sets
    /// collected, every value through `show_invisible`, and the crate escaping and writing them.
    #[derive(Debug)]
    struct Reference(Vec<Arc<AnalysedGuest>>);

    type LabelSet = Vec<(&'static str, String)>;

    fn collect(labels: &mut LabelSet) -> impl FnMut(&'static str, &str) + '_ {
        |name, value| labels.push((name, show_invisible(value).into_owned()))
    }

    impl Collector for Reference {
        fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
            for family in &FAMILIES {
                let (name, unit) = match family.unit {
                    Some(unit) => (
                        family.name.strip_suffix(&format!("_{unit}")).unwrap(),
                        Some(Unit::Other(unit.to_string())),
                    ),
                    None => (family.name, None),
                };
                let kind = match family.kind {
                    Kind::Gauge => MetricType::Gauge,
                    Kind::Counter => MetricType::Counter,
                };
                let help = format!("{}.", family.help);
                let mut encoder = encoder.encode_descriptor(name, &help, unit.as_ref(), kind)?;
                for g in &self.0 {
                    let mut identity = LabelSet::new();
                    labels::identity(g, &mut collect(&mut identity));
                    match (family.read)(g) {
                        None => {}
                        Some(Sample::Info) => {
                            let mut info = identity.clone();
                            labels::info(g, &mut collect(&mut info));
                            ConstGauge::new(1.0).encode(encoder.encode_family(&info)?)?;
                        }
                        Some(Sample::Gauge(value)) => {
                            ConstGauge::new(value).encode(encoder.encode_family(&identity)?)?
                        }
                        Some(Sample::Seconds(value)) => {
                            ConstCounter::new(value).encode(encoder.encode_family(&identity)?)?
                        }
                        Some(Sample::Count(value)) => {
                            ConstCounter::new(value).encode(encoder.encode_family(&identity)?)?
                        }
                        Some(Sample::Parts(parts)) => {
                            for (part, value) in parts {
                                let mut labels = identity.clone();
                                labels.push(("part", part.to_string()));
                                ConstGauge::new(value).encode(encoder.encode_family(&labels)?)?;
                            }
                        }
                    }
                }
            }
            Ok(())
        }
    }

    /// Guests with names that need escaping, with and without a uuid, kernel facts, a thread
    /// split, halt-polling and running totals; and one no longer active.
    fn guests() -> Vec<Arc<AnalysedGuest>> {
        let facts: tickscope_wire::GuestFacts = serde_json::from_value(serde_json::json!({
            "kernel_release": "6.1.0-9-amd64 \"custom\"\\",
            "distro_name": "Debian\nGNU/Linux",
            "config": {"source": "boot_config", "hz": 1000, "no_hz_idle": false},
            "clocksource": "tsc"
        }))
        .unwrap();
        let window = test_window(2, 5.3, 650.0, None);
        let mut split = AnalysedGuest::example(3, &window);
        split.verdict.split = Some(CpuSplit {
            vcpus_pct: 4.25,
            emulator_pct: 0.5,
            iothreads_pct: 0.0,
            vhost_pct: 1e-7,
            measured_s: 60.0,
        });
        split.verdict.halt_poll_pct = Some(12.5);
        split.process_totals = Some(ProcessTotals {
            cpu_s_total: 123_456.789,
            wakeups_total: 9_876_543_210,
        });
        vec![
            AnalysedGuest {
                name: "web \"01\"\\\u{202e}x\n}, # y".into(),
                uuid: Some("0b6f3c8e-0000-4000-8000-000000000021".into()),
                host: "hv-\u{200b}1".into(),
                hypervisor: "数据库-é-🦀".into(),
                management: Some("libvirt".into()),
                cpu_source: Some("cgroup".into()),
                kernel: Some(KernelFacts::new(&facts, "probe_channel", 1.0)),
                ..AnalysedGuest::example(21, &window)
            },
            AnalysedGuest {
                uuid: Some(String::new()),
                process_totals: Some(ProcessTotals {
                    cpu_s_total: 0.0,
                    wakeups_total: -1,
                }),
                ..AnalysedGuest::example(5, &test_window(1, 0.2, 4.0, Some("nohz=off")))
            },
            split,
            AnalysedGuest {
                last_seen_ms: -ACTIVE_WITHIN_MS - 1,
                ..AnalysedGuest::example(4, &window)
            },
        ]
        .into_iter()
        .map(Arc::new)
        .collect()
    }

    /// The per-guest text of `fleet`, kept whole.
    fn written(fleet: &Published, format: Format) -> String {
        let mut out = Out::new(Encoding::Identity, 0);
        write(&mut out, fleet, 0, format).unwrap();
        String::from_utf8(out.finish().unwrap().0).unwrap()
    }

    #[test]
    fn the_text_is_what_prometheus_client_writes_in_both_formats() {
        let guests = guests();
        let fleet = Published::of(&guests);
        let mut active: Vec<_> = guests
            .iter()
            .filter(|g| g.last_seen_ms == 0)
            .cloned()
            .collect();
        active.sort_by_key(|g| g.id);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Reference(active)));
        let mut reference = String::new();
        encode(&mut reference, &registry).unwrap();

        let mut open_metrics = written(&fleet, Format::OpenMetrics);
        open_metrics.push_str("# EOF\n");
        assert_eq!(open_metrics, reference);
        assert!(!open_metrics.contains("guest_id=\"4\""), "not active");
        assert!(
            open_metrics.find("guest_id=\"3\"") < open_metrics.find("guest_id=\"21\""),
            "by id"
        );

        let classic = written(&fleet, Format::Classic);
        assert_eq!(classic, to_classic(&reference).unwrap());
    }
}
