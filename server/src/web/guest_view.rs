//! What the guest page shows, as a plain struct built by a pure function from what was read for
//! it (the analysed guest, its history's waste, its samples, facts events, change and alerts):
//! every figure formatted here, none read.

use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;

use super::alerts::AlertLine;
use super::change_view::RecordedLine;
use super::chart::{Chart, Range};
use super::frame::Frame;
use super::view::{self, GuestRow, Segment};
use crate::analysis::change::Change;
use crate::analysis::cost::{self, CostModel};
use tickscope_wire::Platform;

use crate::analysis::platform::OsFamily;
use crate::analysis::suggest::Suggestion;
use crate::db::{FactsEventRow, SampleRow};
use crate::fleet::{AnalysedGuest, WasteSoFar};

struct SuggestionView {
    title: Vec<Segment>,
    change: Vec<Segment>,
    why: Vec<Segment>,
    saving: String,
    confidence: &'static str,
    rule: &'static str,
}

impl SuggestionView {
    fn new(s: &Suggestion) -> Self {
        SuggestionView {
            title: view::segments(s.title),
            change: view::segments(&s.change),
            why: view::segments(&s.why),
            saving: s.saving_cpu_pct.map_or("unknown".into(), |p| {
                format!("about {} of a host core", view::pct(p))
            }),
            confidence: s.confidence.as_str(),
            rule: s.rule,
        }
    }
}

struct EventLine {
    first: String,
    last: String,
    source: String,
    kernel_release: String,
    cmdline: String,
}

struct SampleLine {
    end: String,
    length_s: String,
    host_cpu: String,
    wakeups: String,
    source: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "guest.html")]
pub struct GuestPage {
    frame: Frame,
    guest: Arc<AnalysedGuest>,
    row: GuestRow,
    last_seen: String,
    confidence: &'static str,
    /// Share of the window the guest idled, and how that was judged.
    idle_share: String,
    activity: String,
    /// The waste as energy and money per year, with the settings used.
    waste_cost: String,
    /// (period, waste accumulated over it) rows.
    waste_so_far: Vec<(&'static str, String)>,
    /// The history charts over `range`, and the ranges to choose from: (key, chosen).
    charts: Vec<Chart>,
    ranges: Vec<(&'static str, bool)>,
    /// Host CPU before and after the last kernel or command-line change; empty without one.
    change: Vec<(&'static str, String)>,
    /// Changes made to it as recorded (by a playbook), newest first, with what each did.
    recorded: Vec<RecordedLine>,
    evidence: Vec<Vec<Segment>>,
    suggestions: Vec<SuggestionView>,
    /// (label, value) rows of the guest's OS and its VM's timer setup.
    platform: Vec<(&'static str, String)>,
    /// (label, value) rows of what the guest reported about its kernel; empty without facts.
    kernel: Vec<(&'static str, String)>,
    kernel_source: String,
    events: Vec<EventLine>,
    samples: Vec<SampleLine>,
    /// Every alert the guest has had, newest first.
    alerts: Vec<AlertLine>,
}

/// What the guest page is made of, as read.
pub struct GuestInputs {
    pub guest: Arc<AnalysedGuest>,
    /// The latest samples, newest first.
    pub samples: Vec<SampleRow>,
    /// Each set of facts each source reported.
    pub events: Vec<FactsEventRow>,
    pub so_far: WasteSoFar,
    /// The last kernel or command-line change, measured, if there was one.
    pub change: Option<Change>,
    pub recorded: Vec<RecordedLine>,
    pub alerts: Vec<AlertLine>,
    pub charts: Vec<Chart>,
    pub range: Range,
    pub model: CostModel,
    pub now_ms: i64,
}

impl GuestPage {
    pub fn build(frame: Frame, input: GuestInputs) -> GuestPage {
        // Only a source that reported more than one set of facts has seen a change.
        let changed = input
            .events
            .iter()
            .any(|e| input.events.iter().filter(|o| o.source == e.source).count() > 1);
        GuestPage {
            frame,
            row: GuestRow::new(&input.guest),
            last_seen: format!(
                "{} ({})",
                view::time(input.guest.last_seen_ms),
                view::ago(input.guest.last_seen_ms, input.now_ms)
            ),
            confidence: input.guest.verdict.classification.confidence.as_str(),
            idle_share: input
                .guest
                .verdict
                .activity
                .idle_share()
                .map_or("–".into(), |share| format!("{:.0} %", share * 100.0)),
            activity: input.guest.verdict.activity.describe(),
            waste_cost: waste_cost(&input.guest, &input.model),
            waste_so_far: waste_so_far(&input.so_far, &input.model),
            charts: input.charts,
            ranges: Range::ALL
                .into_iter()
                .map(|r| (r.key(), r == input.range))
                .collect(),
            change: input.change.as_ref().map_or_else(Vec::new, change_rows),
            recorded: input.recorded,
            evidence: input
                .guest
                .verdict
                .classification
                .evidence
                .iter()
                .map(|e| view::segments(e))
                .collect(),
            suggestions: input
                .guest
                .verdict
                .suggestions
                .iter()
                .map(SuggestionView::new)
                .collect(),
            platform: platform_rows(&input.guest),
            kernel: kernel_rows(&input.guest),
            kernel_source: input.guest.kernel.as_ref().map_or_else(String::new, |k| {
                format!("from {}, received {:.0} s ago", k.source, k.age_s)
            }),
            events: input
                .events
                .into_iter()
                .filter(|_| changed)
                .map(|e| EventLine {
                    first: view::time(e.first_received_ms),
                    last: view::time(e.received_ms),
                    source: e.source,
                    kernel_release: e.kernel_release.unwrap_or_default(),
                    cmdline: e.cmdline.unwrap_or_default(),
                })
                .collect(),
            samples: input.samples.into_iter().map(SampleLine::new).collect(),
            alerts: input.alerts,
            guest: input.guest,
        }
    }
}

impl SampleLine {
    fn new(s: SampleRow) -> SampleLine {
        SampleLine {
            end: view::time(s.end_ms),
            length_s: format!("{:.1}", s.length_ms / 1000.0),
            host_cpu: view::pct(100.0 * s.host_cpu_s * 1000.0 / s.length_ms.max(1.0)),
            wakeups: view::rate(
                s.vcpu_wakeups as f64 / (f64::from(s.vcpus.max(1)) * s.length_ms.max(1.0) / 1000.0),
            ),
            source: s.wakeups_source,
        }
    }
}

/// (label, value) rows of what the guest reported about its kernel; empty without facts.
/// The OS and what told it, and what the VM's configuration says of its timers.
fn platform_rows(guest: &AnalysedGuest) -> Vec<(&'static str, String)> {
    let os = guest.os();
    let setup = &guest.setup;
    vec![
        ("On its platform", platform_line(guest.platform.as_ref())),
        (
            "Operating system",
            match (os.family, os.evidence) {
                (OsFamily::Unknown, _) => "unknown (judged as Linux)".into(),
                (family, Some(evidence)) => format!("{} ({evidence})", family.as_str()),
                (family, None) => family.as_str().into(),
            },
        ),
        (
            "Hyper-V enlightenments",
            match setup.hyperv.as_deref() {
                None => "unknown".into(),
                Some([]) => "none".into(),
                Some(flags) => flags.join(", "),
            },
        ),
        (
            "Host CPU while idle, by part",
            match &guest.verdict.split {
                None => "not split (the agent could not read its threads' run times)".into(),
                Some(split) => format!(
                    "vCPUs {:.2} %, QEMU main loop and helpers {:.2} %, I/O threads {:.2} %, vhost workers {:.2} % of a core",
                    split.vcpus_pct, split.emulator_pct, split.iothreads_pct, split.vhost_pct
                ),
            },
        ),
        (
            "KVM halt polling while idle",
            match guest.verdict.halt_poll_pct {
                Some(pct) => format!("{pct:.2} % of a core (KVM's own count)"),
                None => "not measured (not on KVM, or KVM's debugfs closed to the agent)".into(),
            },
        ),
        (
            "Emulated HPET",
            match setup.hpet {
                None => "unknown",
                Some(true) => "present",
                Some(false) => "absent",
            }
            .into(),
        ),
    ]
}

/// Who the guest is on its platform, in the platform's words.
fn platform_line(platform: Option<&Platform>) -> String {
    let Some(p) = platform else {
        return "not known (a plain QEMU, libvirt or other VM)".into();
    };
    let name = p.name.as_deref().unwrap_or("unnamed");
    let with = |label: &str, value: Option<&String>| {
        value.map_or(String::new(), |v| format!(", {label} {v}"))
    };
    match p.kind.as_str() {
        "openstack" => format!(
            "OpenStack instance {name}{}{}{}",
            with("project", p.group.as_ref()),
            with("flavor", p.flavor.as_ref()),
            with("UUID", p.id.as_ref())
        ),
        "proxmox" => format!(
            "Proxmox VE VM {}{}",
            p.id.as_deref().unwrap_or("?"),
            format_args!(" ({name})")
        ),
        "kubevirt" => format!(
            "KubeVirt VirtualMachineInstance {}/{name}",
            p.group.as_deref().unwrap_or("?")
        ),
        other => format!("{other}: {name}"),
    }
}

fn kernel_rows(guest: &AnalysedGuest) -> Vec<(&'static str, String)> {
    guest.kernel.as_ref().map_or_else(Vec::new, |k| {
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
        vec![
            ("Kernel release", or_unknown(k.kernel_release.clone())),
            ("Distribution", or_unknown(k.distro.clone())),
            (
                "CONFIG_HZ",
                or_unknown(k.config_hz.map(|hz| hz.to_string())),
            ),
            ("NO_HZ built in", k.nohz.as_str().to_string()),
            (
                "Tick rate measured in the guest",
                or_unknown(k.measured_hz.map(|hz| format!("{hz:.1} Hz"))),
            ),
            (
                "Dynticks active",
                or_unknown(
                    k.dynticks_active
                        .map(|d| if d { "yes" } else { "no" }.to_string()),
                ),
            ),
            ("Timer parameters", {
                let flags = k.cmdline_flags();
                if flags.is_empty() {
                    "none".into()
                } else {
                    flags.join(" ")
                }
            }),
            ("Clocksource", or_unknown(k.clocksource.clone())),
            ("Tick device", or_unknown(k.tick_device.clone())),
            ("cpuidle driver", or_unknown(k.cpuidle_driver.clone())),
            (
                "Idle (guest's own count)",
                or_unknown(k.idle_fraction.map(|f| format!("{:.1} %", f * 100.0))),
            ),
        ]
    })
}

/// The waste as energy and money per year, with the settings used.
fn waste_cost(guest: &AnalysedGuest, model: &CostModel) -> String {
    let yearly = cost::of_waste(guest.wasted_cpu_pct(), model);
    format!(
        "If it goes on: {:.1} core-hours a day, {:.1} kWh and {:.2} {} a year ({}).",
        yearly.core_hours_per_day,
        yearly.kwh_per_year,
        yearly.money_per_year,
        model.currency,
        view::cost_basis(model)
    )
}

/// (period, waste accumulated over it) rows.
fn waste_so_far(so_far: &WasteSoFar, model: &CostModel) -> Vec<(&'static str, String)> {
    [
        ("Last 24 hours", so_far.last_24h),
        ("Last 7 days", so_far.last_7d),
    ]
    .into_iter()
    .map(|(label, a)| {
        let (kwh, money) = cost::of_core_hours(a.wasted_core_hours, model);
        let idle = if a.measured_hours > 0.0 {
            format!(
                ", idle {:.0} % of it",
                100.0 * a.idle_hours / a.measured_hours
            )
        } else {
            String::new()
        };
        (
            label,
            format!(
                "{:.2} core-hours, {:.2} kWh, {:.2} {} (over {:.1} h measured{idle})",
                a.wasted_core_hours, kwh, money, model.currency, a.measured_hours
            ),
        )
    })
    .collect()
}

/// Host CPU before and after the last kernel or command-line change.
fn change_rows(c: &Change) -> Vec<(&'static str, String)> {
    vec![
        ("Changed", view::time(c.at_ms)),
        (
            "Host CPU while idle, before → after",
            format!(
                "{} → {}",
                view::pct(c.cpu_before_pct),
                view::pct(c.cpu_after_pct)
            ),
        ),
        (
            "Wake-ups per vCPU per second",
            format!(
                "{} → {}",
                view::rate(c.wakeups_before),
                view::rate(c.wakeups_after)
            ),
        ),
        (
            "Saved",
            format!(
                "{} of a host core (idle {:.0} % of the time since)",
                view::pct(c.saved_cpu_pct),
                c.idle_share_after * 100.0
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_is_named_as_its_platform_names_it() {
        let p = |kind: &str,
                 name: Option<&str>,
                 group: Option<&str>,
                 flavor: Option<&str>,
                 id: Option<&str>| Platform {
            kind: kind.into(),
            name: name.map(str::to_string),
            group: group.map(str::to_string),
            flavor: flavor.map(str::to_string),
            id: id.map(str::to_string),
        };
        let cases = [
            (None, "not known (a plain QEMU, libvirt or other VM)"),
            (
                Some(p(
                    "openstack",
                    Some("web-3"),
                    Some("web-team"),
                    Some("m1.small"),
                    Some("5c7f"),
                )),
                "OpenStack instance web-3, project web-team, flavor m1.small, UUID 5c7f",
            ),
            (
                Some(p("openstack", None, None, None, None)),
                "OpenStack instance unnamed",
            ),
            (
                Some(p("proxmox", Some("win-rdp-01"), None, None, Some("105"))),
                "Proxmox VE VM 105 (win-rdp-01)",
            ),
            (
                Some(p("kubevirt", Some("vm-a"), Some("web-team"), None, None)),
                "KubeVirt VirtualMachineInstance web-team/vm-a",
            ),
            (Some(p("bhyve", Some("x"), None, None, None)), "bhyve: x"),
        ];
        for (platform, line) in cases {
            assert_eq!(platform_line(platform.as_ref()), line);
        }
    }
    use crate::analysis::history::Accumulated;
    use crate::analysis::kernel::{KernelFacts, NohzBuilt};
    use crate::analysis::test_window;

    const NOW_MS: i64 = 1_700_000_090_000;

    fn guest(kernel: Option<KernelFacts>) -> Arc<AnalysedGuest> {
        let window = test_window(2, 4.0, 1000.0, None);
        Arc::new(AnalysedGuest {
            name: "web-01".into(),
            host: "hv-a".into(),
            uses_kvm: Some(true),
            last_seen_ms: NOW_MS - 90_000,
            analysed_ms: NOW_MS,
            kernel,
            ..AnalysedGuest::example(7, &window)
        })
    }

    fn kernel() -> KernelFacts {
        KernelFacts {
            source: "probe_direct".into(),
            age_s: 12.0,
            kernel_release: Some("6.1.0-18-amd64".into()),
            distro: None,
            config_hz: Some(250),
            nohz: NohzBuilt::Idle,
            measured_hz: None,
            dynticks_active: Some(true),
            cmdline: Some("ro quiet nohz=off".into()),
            idle_fraction: None,
            clocksource: None,
            available_clocksources: vec![],
            cpuidle_driver: None,
            os_id: None,
            tick_device: None,
        }
    }

    fn event(source: &str, first_ms: i64, release: &str) -> FactsEventRow {
        FactsEventRow {
            source: source.into(),
            first_received_ms: first_ms,
            received_ms: first_ms + 60_000,
            kernel_release: Some(release.into()),
            cmdline: None,
        }
    }

    fn change() -> Change {
        Change {
            at_ms: NOW_MS - 3_600_000,
            cpu_before_pct: 4.0,
            cpu_after_pct: 0.5,
            wakeups_before: 1000.0,
            wakeups_after: 20.0,
            idle_share_after: 0.9,
            saved_cpu_pct: 3.15,
        }
    }

    fn so_far(core_hours: f64, measured_hours: f64, idle_hours: f64) -> WasteSoFar {
        let a = Accumulated {
            wasted_core_hours: core_hours,
            measured_hours,
            idle_hours,
        };
        WasteSoFar {
            last_24h: a,
            last_7d: a,
        }
    }

    /// What a case reads, what it shows as the page would.
    struct Case {
        what: &'static str,
        kernel: Option<KernelFacts>,
        events: Vec<FactsEventRow>,
        change: Option<Change>,
        so_far: WasteSoFar,
        /// (label, value) rows expected, `None` for those sections expected empty.
        kernel_release: Option<&'static str>,
        timer_parameters: Option<&'static str>,
        events_shown: usize,
        saved: Option<&'static str>,
        last_24h: &'static str,
    }

    #[test]
    fn the_guest_page_shows_what_was_read_formatted() {
        let cases = vec![
            Case {
                what: "host side only, nothing measured yet",
                kernel: None,
                events: vec![],
                change: None,
                so_far: so_far(0.0, 0.0, 0.0),
                kernel_release: None,
                timer_parameters: None,
                events_shown: 0,
                saved: None,
                last_24h: "0.00 core-hours, 0.00 kWh, 0.00 EUR (over 0.0 h measured)",
            },
            Case {
                what: "facts from two sources, one set each: no change to list",
                kernel: Some(kernel()),
                events: vec![
                    event("probe_direct", NOW_MS - 600_000, "6.1.0-18-amd64"),
                    event("qemu_ga", NOW_MS - 500_000, "6.1.0-18-amd64"),
                ],
                change: None,
                so_far: so_far(1.5, 24.0, 12.0),
                kernel_release: Some("6.1.0-18-amd64"),
                timer_parameters: Some("nohz=off"),
                events_shown: 0,
                saved: None,
                last_24h: "(over 24.0 h measured, idle 50 % of it)",
            },
            Case {
                what: "one source saw a new kernel: every set is listed, and the change measured",
                kernel: Some(kernel()),
                events: vec![
                    event("probe_direct", NOW_MS - 7_200_000, "5.10.0-28-amd64"),
                    event("probe_direct", NOW_MS - 3_600_000, "6.1.0-18-amd64"),
                    event("qemu_ga", NOW_MS - 3_500_000, "6.1.0-18-amd64"),
                ],
                change: Some(change()),
                so_far: so_far(0.25, 2.0, 2.0),
                kernel_release: Some("6.1.0-18-amd64"),
                timer_parameters: Some("nohz=off"),
                events_shown: 3,
                saved: Some("3.15 % of a host core (idle 90 % of the time since)"),
                last_24h: "(over 2.0 h measured, idle 100 % of it)",
            },
        ];
        for case in cases {
            let sample = SampleRow {
                end_ms: NOW_MS - 90_000,
                length_ms: 10_000.0,
                vcpus: 2,
                host_cpu_s: 0.05,
                vcpu_wakeups: 2000,
                wakeups_source: "kvm_exits".into(),
            };
            let model = CostModel::default();
            let page = GuestPage::build(
                Frame::default(),
                GuestInputs {
                    guest: guest(case.kernel),
                    samples: vec![sample],
                    events: case.events,
                    so_far: case.so_far,
                    change: case.change,
                    recorded: vec![],
                    alerts: vec![],
                    charts: vec![],
                    range: Range::Day,
                    model: model.clone(),
                    now_ms: NOW_MS,
                },
            );
            let what = case.what;
            let row = |rows: &[(&'static str, String)], label: &str| {
                rows.iter()
                    .find(|(l, _)| *l == label)
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(
                row(&page.kernel, "Kernel release").as_deref(),
                case.kernel_release,
                "{what}"
            );
            assert_eq!(
                row(&page.kernel, "Timer parameters").as_deref(),
                case.timer_parameters,
                "{what}"
            );
            assert_eq!(page.events.len(), case.events_shown, "{what}");
            assert_eq!(row(&page.change, "Saved").as_deref(), case.saved, "{what}");
            assert_eq!(page.change.len(), if case.saved.is_some() { 4 } else { 0 });
            let (label, last_24h) = &page.waste_so_far[0];
            assert_eq!(*label, "Last 24 hours", "{what}");
            assert!(last_24h.contains(case.last_24h), "{what}: {last_24h}");
            assert!(
                last_24h.contains(&format!(" {} ", model.currency)),
                "{what}: {last_24h}"
            );
            // The same in every case: the sample, the clock, the chosen range.
            assert_eq!(
                page.last_seen, "2023-11-14 22:13:20 UTC (1 min ago)",
                "{what}"
            );
            let s = &page.samples[0];
            assert_eq!(
                (s.length_s.as_str(), s.host_cpu.as_str(), s.wakeups.as_str()),
                ("10.0", "0.50 %", "100"),
                "{what}"
            );
            assert_eq!(
                page.ranges,
                vec![("1h", false), ("24h", true), ("7d", false), ("30d", false)],
                "{what}"
            );
            assert!(page.waste_cost.starts_with("If it goes on: "), "{what}");
        }
    }
}
