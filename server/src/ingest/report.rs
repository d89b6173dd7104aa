//! The report edge: where a report from an agent becomes trusted data: parse, don't validate.
//!
//! A wire [`Report`] is turned into a [`ValidReport`] once; behind this point nothing needs
//! checking again. A report with any bad value is refused whole, naming the field.

use std::collections::{HashMap, HashSet};

use tickscope_wire::{
    BlindSpot, CpuParts, FactsSource, GuestSample, Hypervisor, MAX_BLIND_SPOT_TEXT_CHARS,
    MAX_BLIND_SPOTS, MAX_BOOT_ARGS_CHARS, MAX_HYPERV_FLAGS, MAX_LABEL_CHARS, MAX_NAME_CHARS,
    MAX_VCPUS, Report, VmConfig, WakeupsSource, normalise_uuid,
};

use super::facts::{self, ValidFacts};
use super::interval;
use super::process_totals::ReportedTotals;
use crate::error::{AppError, AppResult};

/// Limits on what one report may hold: far above any real host, low enough to keep one bad
/// report from costing the server much. The guests are a setting (`serve
/// --max-guests-per-report`); this is its default.
pub const MAX_GUESTS: usize = 10_000;
/// The most CPUs a host may say it has: Linux's largest build (x86-64 `MAXSMP`, `NR_CPUS`).
/// What the host says bounds what its VMs may claim, together and each.
pub const MAX_HOST_CPUS: u32 = 8_192;
/// No vCPU thread is woken more often than this, per second (a periodic tick is at most 1000).
pub const MAX_WAKEUPS_PER_VCPU_S: f64 = 1_000_000.0;
/// CPU time is counted in clock ticks (10 ms), so a VM can appear to use slightly more than the
/// interval allows: this much slack per CPU it may keep busy, in seconds.
pub const CPU_TICK_SLACK_S: f64 = 0.05;
/// Cores a VM process's threads other than its vCPUs may keep busy at once, on top of its vCPUs:
/// QEMU's main loop, its I/O threads (one per `-object iothread`, usually one or two), the thread
/// pool behind its block I/O, and vhost workers (one per vhost device or virtio-net queue pair;
/// threads of the VM process since Linux 6.4). Under heavy I/O these together keep one or two
/// cores busy; four leaves room, and still tells a 1-vCPU VM from one using 8 cores.
pub const VM_OVERHEAD_CPUS: u32 = 4;
/// Most CPU time a VM process's running total may claim: 30,000 core-years.
const MAX_TOTAL_CPU_S: f64 = 1e12;

#[derive(Debug, Clone, PartialEq)]
pub struct ValidReport {
    pub agent_id: String,
    pub run_id: String,
    pub agent_version: String,
    pub seq: i64,
    pub host: ValidHost,
    pub start_ms: i64,
    pub end_ms: i64,
    pub length_ms: f64,
    pub guests: Vec<ValidGuest>,
    /// Reports the agent's spool dropped unsent, since it was created.
    pub dropped_reports: i64,
    /// Guests whose facts were not acceptable and were left out (the rest of the report is
    /// stored): said in one line of the log, not one per guest.
    pub facts_left_out: LeftOut,
}

/// Facts left out of a report: how many guests', and the first guest's with why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeftOut {
    pub guests: usize,
    pub first: Option<(String, String)>,
}

impl LeftOut {
    fn add(&mut self, guest: &str, why: &AppError) {
        self.guests += 1;
        if self.first.is_none() {
            self.first = Some((guest.to_string(), why.to_string()));
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidHost {
    pub name: String,
    pub cpus: u32,
    pub kernel: String,
    pub kvm_halt_poll_ns: Option<i64>,
    /// The host's boot id, lower-case; without it a process's totals cannot be told apart from
    /// those of a process before a reboot, and are not used.
    pub boot_id: Option<String>,
    /// What the agent cannot see, as JSON (`[]` for nothing).
    pub blind_spots_json: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidGuest {
    pub hypervisor: Hypervisor,
    /// UUID when known, else the name: what makes this guest the same guest tomorrow.
    pub identity: String,
    pub name: String,
    pub uuid: Option<String>,
    pub management: Option<String>,
    pub pid: u32,
    pub vcpus: u32,
    /// [`max_busy_cpus`] of this VM: what its CPU time is held to, also over missing reports.
    pub max_busy_cpus: u32,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    pub wakeups_source: &'static str,
    pub boot_args: Option<String>,
    pub uses_kvm: Option<bool>,
    /// Where the agent read its CPU time (`wire::CpuSource` names).
    pub cpu_source: Option<&'static str>,
    /// What the host sees of the VM's setup (default: nothing known).
    pub vm_config: VmConfig,
    /// Who the VM is on its platform, as JSON for storage, where the agent could tell.
    pub platform_json: Option<String>,
    /// Where its host CPU went among its threads, when the agent could tell.
    pub cpu_parts: Option<CpuParts>,
    /// Host CPU KVM spent halt-polling its vCPUs, in core-seconds, where the agent read it.
    pub halt_poll_s: Option<f64>,
    /// What the guest said about itself, delivered through the host agent.
    pub facts: Option<ValidFacts>,
    /// The VM process's running totals, named by host boot, pid and start time.
    pub totals: Option<ReportedTotals>,
    /// Names the VM process (host boot, pid, start time where the agent sent them): a new one
    /// is a new boot of the guest, and the facts of the old one no longer hold.
    pub vm_process: String,
}

/// The most cores a VM process can keep busy at once: its vCPUs and its other threads, and never
/// more than the host has. The vCPUs are a count the server can hold the VM to only when the
/// agent counted the vCPU threads themselves; otherwise (`whole_process`) they come from the
/// VM's command line or configuration, or are 1 when the agent found none there, and only the
/// host's CPUs bound the VM, so that a guessed count never gets a real host's reports refused.
pub fn max_busy_cpus(host_cpus: u32, vcpus: u32, wakeups_source: WakeupsSource) -> u32 {
    match wakeups_source {
        WakeupsSource::VcpuThreads => vcpus.saturating_add(VM_OVERHEAD_CPUS).min(host_cpus),
        WakeupsSource::WholeProcess | WakeupsSource::Other => host_cpus,
    }
}

/// How far the parts of a VM's CPU counted from its threads (and KVM's halt polling) may pass
/// the VM's own counter, read a moment apart: a tenth of it, and a tenth of a second.
pub const PARTS_SLACK_FRACTION: f64 = 0.1;
pub const PARTS_SLACK_S: f64 = 0.1;

/// Checks a report against the server's clock (`now_ms`), with the default limit of guests.
pub fn validate(report: Report, now_ms: i64) -> AppResult<ValidReport> {
    validate_within(report, now_ms, MAX_GUESTS)
}

/// Checks a report against the server's clock (`now_ms`); it may hold at most `max_guests`.
/// The work is linear in the report, whatever its names or values.
pub fn validate_within(report: Report, now_ms: i64, max_guests: usize) -> AppResult<ValidReport> {
    let agent_id = text("agent.id", report.agent.id, 128)?;
    let run_id = text("agent.run_id", report.agent.run_id, 128)?;
    let agent_version = text("agent.version", report.agent.version, 64)?;
    let seq = i64::try_from(report.seq).map_err(|_| AppError::invalid("seq", "too large"))?;

    let host = ValidHost {
        // `bind-a ` is `bind-a`: a host is named by its agent, and a name that differs only in
        // surrounding space would be a second host beside the first (and its token's).
        name: text(
            "host.name",
            report.host.name.trim().to_string(),
            MAX_NAME_CHARS,
        )?,
        cpus: in_range("host.cpus", report.host.cpus, 1, MAX_HOST_CPUS)?,
        kernel: text_or_empty("host.kernel", report.host.kernel, MAX_NAME_CHARS)?,
        kvm_halt_poll_ns: report
            .host
            .kvm_halt_poll_ns
            .map(|ns| {
                i64::try_from(ns)
                    .map_err(|_| AppError::invalid("host.kvm_halt_poll_ns", "too large"))
            })
            .transpose()?,
        boot_id: report
            .host
            .boot_id
            .map(|id| {
                normalise_uuid(&id)
                    .ok_or_else(|| AppError::invalid("host.boot_id", "is not a UUID"))
            })
            .transpose()?,
        blind_spots_json: blind_spots(report.host.blind_spots)?,
    };

    let length_ms = interval::check(&report.interval, now_ms)?;

    if report.guests.len() > max_guests {
        return Err(AppError::invalid(
            "guests",
            format!(
                "{} guests in one report; this server takes at most {max_guests} \
                 (serve --max-guests-per-report)",
                report.guests.len()
            ),
        ));
    }
    let mut identities = Identities::default();
    let mut facts_left_out = LeftOut::default();
    let guests = report
        .guests
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let mut guest = validate_guest(
                &format!("guests[{i}]"),
                g,
                &host,
                length_ms,
                &mut facts_left_out,
            )?;
            guest.identity = identities.distinct(guest.identity);
            Ok(guest)
        })
        .collect::<AppResult<Vec<_>>>()?;
    // The host's VMs together cannot use more than the host has, whatever each may.
    let max_host_cpu_s = (length_ms / 1000.0 + CPU_TICK_SLACK_S) * f64::from(host.cpus);
    let host_cpu_s: f64 = guests.iter().map(|g| g.host_cpu_s).sum();
    if host_cpu_s > max_host_cpu_s {
        return Err(AppError::invalid(
            "guests",
            format!(
                "the guests used {host_cpu_s:.2} s of CPU together, more than the interval × \
                 the host's {} CPUs ({max_host_cpu_s:.2} s)",
                host.cpus
            ),
        ));
    }

    Ok(ValidReport {
        agent_id,
        run_id,
        agent_version,
        seq,
        host,
        start_ms: report.interval.start_ms,
        end_ms: report.interval.end_ms,
        length_ms,
        guests,
        dropped_reports: i64::try_from(report.dropped_reports).unwrap_or(i64::MAX),
        facts_left_out,
    })
}

/// Keeps the guests of one report apart: two VMs on one host may share a name (plain QEMU
/// without -uuid), and the second becomes `name#2`, even apart from a VM that happens to be
/// named like the suffixed one.
#[derive(Default)]
struct Identities {
    taken: HashSet<String>,
    /// The next suffix to try, per identity met more than once. Each try either takes the
    /// suffix or moves this on past one taken by a guest named so, so that a report of n guests
    /// makes at most 2n tries, whatever their names.
    next_suffix: HashMap<String, u32>,
    /// Tries made, for the test that they stay linear.
    #[cfg(test)]
    tries: usize,
}

impl Identities {
    fn distinct(&mut self, identity: String) -> String {
        #[cfg(test)]
        {
            self.tries += 1;
        }
        if self.taken.insert(identity.clone()) {
            return identity;
        }
        let n = self.next_suffix.entry(identity.clone()).or_insert(2);
        loop {
            #[cfg(test)]
            {
                self.tries += 1;
            }
            let candidate = format!("{identity}#{n}");
            *n += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

fn validate_guest(
    at: &str,
    g: GuestSample,
    host: &ValidHost,
    length_ms: f64,
    facts_left_out: &mut LeftOut,
) -> AppResult<ValidGuest> {
    let field = |name: &str| format!("{at}.{name}");
    let name = text(&field("name"), g.name, MAX_NAME_CHARS)?;
    let uuid = g
        .uuid
        .map(|u| {
            normalise_uuid(&u).ok_or_else(|| AppError::invalid(field("uuid"), "is not a UUID"))
        })
        .transpose()?;
    // A VM may be given more vCPUs than its host has (overcommit), so only the hard limit.
    let vcpus = in_range(&field("vcpus"), g.vcpus, 1, MAX_VCPUS)?;
    let length_s = length_ms / 1000.0;
    let busy_cpus = max_busy_cpus(host.cpus, vcpus, g.wakeups_source);
    let max_cpu_s = (length_s + CPU_TICK_SLACK_S) * f64::from(busy_cpus);
    if !(g.host_cpu_seconds.is_finite() && (0.0..=max_cpu_s).contains(&g.host_cpu_seconds)) {
        return Err(AppError::invalid(
            field("host_cpu_seconds"),
            format!(
                "must be between 0 and the interval × {busy_cpus} CPUs ({max_cpu_s:.2} s): \
                 the VM's vCPUs and {VM_OVERHEAD_CPUS} for its other threads, at most the host's CPUs"
            ),
        ));
    }
    let max_wakeups = MAX_WAKEUPS_PER_VCPU_S * f64::from(vcpus) * length_s;
    if g.vcpu_wakeups as f64 > max_wakeups {
        return Err(AppError::invalid(
            field("vcpu_wakeups"),
            format!("more than {MAX_WAKEUPS_PER_VCPU_S} per vCPU per second is not a real rate"),
        ));
    }
    // Each part is some of the VM's CPU, held to the same bound; the threads' run times are read
    // a moment apart from the VM's counter, so the parts counted from threads may pass it a
    // little, never by more than PARTS_SLACK. KVM's halt polling is some of the vCPUs' time.
    let within_vm_s = g.host_cpu_seconds * (1.0 + PARTS_SLACK_FRACTION) + PARTS_SLACK_S;
    if let Some(parts) = &g.cpu_parts {
        if g.wakeups_source != WakeupsSource::VcpuThreads {
            return Err(AppError::invalid(
                field("cpu_parts"),
                "a split needs the vCPU threads told apart (wakeups_source vcpu_threads)",
            ));
        }
        let figures = [
            ("vcpus_s", parts.vcpus_s),
            ("iothreads_s", parts.iothreads_s),
            ("vhost_s", parts.vhost_s),
            ("emulator_s", parts.emulator_s),
        ];
        for (name, value) in figures {
            if !(value.is_finite() && (0.0..=max_cpu_s).contains(&value)) {
                return Err(AppError::invalid(
                    field(&format!("cpu_parts.{name}")),
                    format!("must be between 0 and {max_cpu_s:.2} s, as host_cpu_seconds"),
                ));
            }
        }
        let counted_s = parts.vcpus_s + parts.iothreads_s + parts.vhost_s;
        if counted_s > within_vm_s {
            return Err(AppError::invalid(
                field("cpu_parts"),
                format!(
                    "the vCPU, I/O-thread and vhost parts add up to {counted_s:.3} s, more than the VM's host_cpu_seconds ({:.3} s)",
                    g.host_cpu_seconds
                ),
            ));
        }
    }
    if let Some(polled) = g.halt_poll_seconds
        && !(polled.is_finite() && (0.0..=within_vm_s).contains(&polled))
    {
        return Err(AppError::invalid(
            field("halt_poll_seconds"),
            format!(
                "must be between 0 and the VM's host_cpu_seconds ({:.3} s): polling is vCPU time",
                g.host_cpu_seconds
            ),
        ));
    }
    let vcpu_wakeups = i64::try_from(g.vcpu_wakeups)
        .map_err(|_| AppError::invalid(field("vcpu_wakeups"), "too large"))?;
    let management = g
        .management
        .map(|m| text(&field("management"), m, MAX_LABEL_CHARS))
        .transpose()?;
    let boot_args = g
        .boot_args
        .map(|a| text_or_empty(&field("boot_args"), a, MAX_BOOT_ARGS_CHARS))
        .transpose()?;
    // The agent sends the setup cleaned (`VmConfig::cleaned`): anything else is not its.
    let vm_config = g.vm_config.unwrap_or_default();
    if vm_config.clone().cleaned() != vm_config {
        return Err(AppError::invalid(
            field("vm_config"),
            format!(
                "Hyper-V enlightenments must be lower-case names, each once and sorted, at most {MAX_HYPERV_FLAGS}; the OS hint plain text of at most {MAX_LABEL_CHARS} characters"
            ),
        ));
    }
    let platform_json = match g.platform {
        Some(platform) if platform.clone().cleaned() != platform || platform.kind.is_empty() => {
            return Err(AppError::invalid(
                field("platform"),
                format!(
                    "names must be plain text without surrounding blanks, a kind and a flavor or id of at most {MAX_LABEL_CHARS} characters, the others of at most {MAX_NAME_CHARS}"
                ),
            ));
        }
        Some(platform) => Some(
            serde_json::to_string(&platform)
                .map_err(|e| AppError::encode("a VM's platform as JSON", e))?,
        ),
        None => None,
    };
    // Facts come from inside a guest, through the host agent: if they are not acceptable, they
    // are left out (the report's caller says so in the log, once for all of its guests), and the
    // host's measurements are still stored.
    let facts = g.facts.and_then(|delivered| {
        let checked = if delivered.source == FactsSource::ProbeDirect {
            Err(AppError::invalid(
                field("facts.source"),
                "probe_direct facts come with a guest token, not inside a host report",
            ))
        } else {
            facts::validate(&field("facts"), delivered.source.as_str(), delivered.facts)
        };
        checked.inspect_err(|e| facts_left_out.add(&name, e)).ok()
    });
    let vm_process = match (&host.boot_id, &g.totals) {
        (Some(boot_id), Some(t)) => format!("{boot_id}:{}:{}", g.pid, t.start_ticks),
        (None, Some(t)) => format!("{}:{}", g.pid, t.start_ticks),
        (_, None) => g.pid.to_string(),
    };
    let totals = match g.totals {
        Some(t) => {
            if !(t.host_cpu_seconds.is_finite()
                && (0.0..=MAX_TOTAL_CPU_S).contains(&t.host_cpu_seconds))
            {
                return Err(AppError::invalid(
                    field("totals.host_cpu_seconds"),
                    format!("must be between 0 and {MAX_TOTAL_CPU_S} s"),
                ));
            }
            let vcpu_wakeups = i64::try_from(t.vcpu_wakeups)
                .map_err(|_| AppError::invalid(field("totals.vcpu_wakeups"), "too large"))?;
            host.boot_id.as_ref().map(|boot_id| ReportedTotals {
                // Totals of another counter (a new agent reading another CPU source) are not
                // comparable with the stored ones: they start a new count like a new process.
                process_key: format!(
                    "{boot_id}:{}:{}:{}:{}",
                    g.pid,
                    t.start_ticks,
                    g.wakeups_source.as_str(),
                    g.cpu_source.map_or("stat_ticks", |s| s.as_str())
                ),
                host_cpu_s: t.host_cpu_seconds,
                vcpu_wakeups,
            })
        }
        None => None,
    };
    let identity = uuid.clone().unwrap_or_else(|| format!("name:{name}"));
    Ok(ValidGuest {
        hypervisor: g.hypervisor,
        identity,
        name,
        uuid,
        management,
        pid: g.pid,
        vcpus,
        max_busy_cpus: busy_cpus,
        host_cpu_s: g.host_cpu_seconds,
        vcpu_wakeups,
        wakeups_source: g.wakeups_source.as_str(),
        boot_args,
        uses_kvm: g.uses_kvm,
        cpu_source: g.cpu_source.map(|s| s.as_str()),
        vm_config,
        platform_json,
        cpu_parts: g.cpu_parts,
        halt_poll_s: g.halt_poll_seconds,
        facts,
        totals,
        vm_process,
    })
}

fn in_range(field: &str, value: u32, min: u32, max: u32) -> AppResult<u32> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(AppError::invalid(
            field,
            format!("must be between {min} and {max}"),
        ))
    }
}

/// The agent's blind spots, checked like every string from a host, as stored.
fn blind_spots(spots: Vec<BlindSpot>) -> AppResult<String> {
    if spots.len() > MAX_BLIND_SPOTS {
        return Err(AppError::invalid(
            "host.blind_spots",
            format!("more than {MAX_BLIND_SPOTS}"),
        ));
    }
    let mut checked = Vec::with_capacity(spots.len());
    for (i, spot) in spots.into_iter().enumerate() {
        let field = |name: &str| format!("host.blind_spots[{i}].{name}");
        checked.push(BlindSpot {
            check: spot.check,
            detail: text(&field("detail"), spot.detail, MAX_BLIND_SPOT_TEXT_CHARS)?,
            fix: text(&field("fix"), spot.fix, MAX_BLIND_SPOT_TEXT_CHARS)?,
        });
    }
    serde_json::to_string(&checked).map_err(|e| AppError::encode("blind spots as JSON", e))
}

/// A non-empty string of at most `max_chars` characters without control characters.
fn text(field: &str, value: String, max_chars: usize) -> AppResult<String> {
    if value.trim().is_empty() {
        return Err(AppError::invalid(field, "must not be empty"));
    }
    text_or_empty(field, value, max_chars)
}

fn text_or_empty(field: &str, value: String, max_chars: usize) -> AppResult<String> {
    if value.chars().count() > max_chars {
        return Err(AppError::invalid(
            field,
            format!("longer than {max_chars} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(AppError::invalid(field, "contains control characters"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::ingest::MAX_REPLAY_AGE_MS;

    const NOW: i64 = 1_800_000_000_000;

    fn report() -> serde_json::Value {
        json!({
            "agent": {"id": "m1", "run_id": "r1", "version": "0.1.0"},
            "seq": 3,
            "host": {"name": "hv1", "cpus": 4, "kernel": "6.1.0-57-amd64",
                     "boot_id": "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9"},
            "interval": {"start_ms": NOW - 10_000, "end_ms": NOW, "length_ns": 10_000_000_000u64},
            "guests": [{
                "hypervisor": "qemu", "name": "web", "uuid": "7D3B2C1A-0000-4000-8000-00000000ABCD",
                "pid": 42, "vcpus": 2, "host_cpu_seconds": 0.8, "vcpu_wakeups": 12000,
                "wakeups_source": "vcpu_threads", "boot_args": "nohz=off",
                "totals": {"start_ticks": 1234, "host_cpu_seconds": 80.5, "vcpu_wakeups": 900000}
            }]
        })
    }

    fn check(value: serde_json::Value) -> AppResult<ValidReport> {
        validate(serde_json::from_value(value).unwrap(), NOW)
    }

    #[test]
    fn a_good_report_becomes_typed_values() {
        let r = check(report()).unwrap();
        assert_eq!(r.length_ms, 10_000.0);
        let g = &r.guests[0];
        assert_eq!(g.identity, "7d3b2c1a-0000-4000-8000-00000000abcd");
        assert_eq!(g.hypervisor, Hypervisor::Qemu);
        assert_eq!(g.wakeups_source, "vcpu_threads");
        let totals = g.totals.as_ref().unwrap();
        assert_eq!(
            totals.process_key,
            "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9:42:1234:vcpu_threads:stat_ticks",
            "an agent that names no CPU source counted stat ticks"
        );
        assert_eq!(totals.vcpu_wakeups, 900_000);
    }

    #[test]
    fn a_vm_setup_is_taken_only_as_the_agent_cleans_it() {
        let with = |setup: serde_json::Value| {
            let mut r = report();
            r["guests"][0]["vm_config"] = setup;
            check(r)
        };
        let good =
            with(json!({"hyperv": ["relaxed", "stimer"], "hpet": false, "os_hint": "win10"}))
                .unwrap();
        assert_eq!(
            good.guests[0].vm_config,
            VmConfig {
                hyperv: Some(vec!["relaxed".into(), "stimer".into()]),
                hpet: Some(false),
                os_hint: Some("win10".into()),
            }
        );
        assert_eq!(
            check(report()).unwrap().guests[0].vm_config,
            VmConfig::default()
        );
        for bad in [
            json!({"hyperv": ["Stimer"]}),
            json!({"hyperv": ["stimer", "relaxed"]}),
            json!({"hyperv": ["stimer", "stimer"]}),
            json!({"hyperv": ["x".repeat(40)]}),
            json!({"os_hint": "win\u{1b}[2J"}),
            json!({"os_hint": " win10"}),
        ] {
            let err = with(bad.clone()).unwrap_err();
            assert!(
                err.to_string().contains("guests[0].vm_config"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn halt_polling_and_the_split_are_held_to_the_vms_cpu() {
        // The report's guest used 0.8 s of host CPU.
        let with = |polled: serde_json::Value| {
            let mut r = report();
            r["guests"][0]["halt_poll_seconds"] = polled;
            check(r)
        };
        assert_eq!(with(json!(0.3)).unwrap().guests[0].halt_poll_s, Some(0.3));
        assert_eq!(
            with(json!(0.9)).unwrap().guests[0].halt_poll_s,
            Some(0.9),
            "read a moment apart: a little over"
        );
        for bad in [json!(-0.1), json!(1.5), json!(1e9)] {
            let err = with(bad.clone()).unwrap_err();
            assert!(
                err.to_string().contains("guests[0].halt_poll_seconds"),
                "{bad}: {err}"
            );
        }
        let split = |parts: serde_json::Value, source: &str| {
            let mut r = report();
            r["guests"][0]["cpu_parts"] = parts;
            r["guests"][0]["wakeups_source"] = json!(source);
            check(r)
        };
        let parts = |vcpus: f64, io: f64| json!({"vcpus_s": vcpus, "iothreads_s": io, "vhost_s": 0.0, "emulator_s": 0.0});
        assert!(split(parts(0.7, 0.1), "vcpu_threads").is_ok());
        for (bad, source, why) in [
            (parts(0.7, 3.0), "vcpu_threads", "more than the VM used"),
            (parts(-0.1, 0.1), "vcpu_threads", "negative"),
            (
                parts(0.7, 0.1),
                "whole_process",
                "no vCPU threads to split by",
            ),
        ] {
            let err = split(bad, source).unwrap_err();
            assert!(
                err.to_string().contains("guests[0].cpu_parts"),
                "{why}: {err}"
            );
        }
    }

    #[test]
    fn totals_without_the_host_boot_id_are_not_used() {
        let mut r = report();
        r["host"].as_object_mut().unwrap().remove("boot_id");
        assert_eq!(check(r).unwrap().guests[0].totals, None);
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        let cases: [(&str, serde_json::Value, &str); 21] = [
            (
                "/guests/0/host_cpu_seconds",
                json!(-0.1),
                "guests[0].host_cpu_seconds",
            ),
            (
                "/guests/0/host_cpu_seconds",
                json!(41.0),
                "guests[0].host_cpu_seconds",
            ),
            ("/guests/0/vcpus", json!(0), "guests[0].vcpus"),
            (
                "/guests/0/vcpu_wakeups",
                json!(30_000_000u64),
                "guests[0].vcpu_wakeups",
            ),
            ("/guests/0/name", json!(""), "guests[0].name"),
            ("/guests/0/name", json!("evil\u{1b}[31m"), "guests[0].name"),
            ("/guests/0/name", json!("x".repeat(300)), "guests[0].name"),
            ("/guests/0/uuid", json!("not-a-uuid"), "guests[0].uuid"),
            ("/host/cpus", json!(0), "host.cpus"),
            (
                "/interval/end_ms",
                json!(NOW + 3_600_000),
                "interval.end_ms",
            ),
            ("/interval/length_ns", json!(1000), "interval.length_ns"),
            ("/interval/start_ms", json!(NOW + 1), "interval.end_ms"),
            ("/interval/start_ms", json!(NOW), "interval.end_ms"),
            ("/interval/end_ms", json!(0), "interval.end_ms"),
            ("/interval/end_ms", json!(i64::MIN), "interval.end_ms"),
            (
                "/interval/end_ms",
                json!(NOW - MAX_REPLAY_AGE_MS - 1),
                "interval.end_ms",
            ),
            (
                "/interval/length_ns",
                json!(86_400_000_000_000u64),
                "interval.length_ns",
            ),
            (
                "/interval/start_ms",
                json!(NOW - 1000),
                "interval.length_ns",
            ),
            ("/host/boot_id", json!("reboot"), "host.boot_id"),
            (
                "/guests/0/totals/host_cpu_seconds",
                json!(-1.0),
                "guests[0].totals.host_cpu_seconds",
            ),
            (
                "/guests/0/totals/vcpu_wakeups",
                json!(u64::MAX),
                "guests[0].totals.vcpu_wakeups",
            ),
        ];
        for (pointer, value, field) in cases {
            let mut r = report();
            *r.pointer_mut(pointer).unwrap() = value.clone();
            match check(r) {
                Err(AppError::Invalid { field: f, .. }) => {
                    assert_eq!(f, field, "{pointer} = {value}")
                }
                other => panic!("{pointer} = {value} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn cpu_time_is_held_to_what_the_vm_can_use() {
        // A 10 s interval: (host CPUs, vCPUs, how the vCPUs were counted, CPU seconds, taken).
        let cases: [(u32, u32, &str, f64, bool); 10] = [
            (64, 1, "vcpu_threads", 10.0, true),
            (64, 1, "vcpu_threads", 50.2, true),
            (64, 1, "vcpu_threads", 50.3, false),
            (64, 1, "vcpu_threads", 80.0, false),
            // A vCPU count read from a command line is no bound: only the host's CPUs are.
            (64, 1, "whole_process", 80.0, true),
            (64, 1, "whole_process", 643.0, true),
            (64, 1, "whole_process", 643.3, false),
            (4, 2, "vcpu_threads", 40.1, true),
            (4, 2, "vcpu_threads", 40.3, false),
            // More vCPUs than the host has (overcommit): the host's CPUs bound it.
            (8, 16, "vcpu_threads", 80.3, true),
        ];
        for (host_cpus, vcpus, source, cpu_s, taken) in cases {
            let mut r = report();
            r["host"]["cpus"] = json!(host_cpus);
            r["guests"][0]["vcpus"] = json!(vcpus);
            r["guests"][0]["wakeups_source"] = json!(source);
            r["guests"][0]["host_cpu_seconds"] = json!(cpu_s);
            let case = format!("{cpu_s} s of {vcpus} vCPUs ({source}) on {host_cpus} CPUs");
            match check(r) {
                Ok(_) => assert!(taken, "{case} was taken"),
                Err(AppError::Invalid { field, .. }) => {
                    assert!(!taken, "{case} was refused");
                    assert_eq!(field, "guests[0].host_cpu_seconds", "{case}");
                }
                Err(other) => panic!("{case}: {other:?}"),
            }
        }
    }

    /// A report of `n` VMs all named `web`, without UUIDs, the last one unacceptable: the shape
    /// that once took 4 s to refuse at 10,000 guests.
    fn same_named(n: usize) -> serde_json::Value {
        let mut r = report();
        let mut g = r["guests"][0].clone();
        g.as_object_mut().unwrap().remove("uuid");
        let mut guests = vec![g.clone(); n];
        guests[n - 1]["vcpus"] = json!(0);
        r["guests"] = json!(guests);
        r
    }

    #[test]
    fn validation_grows_no_faster_than_the_report_whatever_its_names() {
        let (small, large) = (same_named(1_000), same_named(8_000));
        crate::growth::assert_not_super_linear(
            "validate",
            || assert!(check(small.clone()).is_err()),
            || assert!(check(large.clone()).is_err()),
        );
    }

    #[test]
    fn keeping_guests_apart_takes_at_most_two_tries_per_guest_whatever_their_names() {
        // Names as hostile as they come: all alike, and alike the suffixed forms of each other.
        let shapes: [Vec<String>; 4] = [
            vec!["web".to_string(); 5_000],
            (0..5_000)
                .map(|i| match i % 2 {
                    0 => "web".to_string(),
                    _ => format!("web#{}", i / 2 + 2),
                })
                .collect(),
            (0..5_000)
                .map(|i| match i % 3 {
                    0 => "a".to_string(),
                    1 => "a#2".to_string(),
                    _ => "a#2#2".to_string(),
                })
                .collect(),
            (0..5_000).map(|i| format!("vm-{i}")).collect(),
        ];
        for names in shapes {
            let mut identities = Identities::default();
            let distinct: HashSet<String> = names
                .iter()
                .map(|n| identities.distinct(n.clone()))
                .collect();
            assert_eq!(distinct.len(), names.len(), "{:?}", &names[..3]);
            assert!(
                identities.tries <= 2 * names.len(),
                "{} tries for {} guests ({:?}, ...)",
                identities.tries,
                names.len(),
                &names[..3]
            );
        }
    }

    proptest::proptest! {
        /// Whatever names a report holds, alike or alike the suffixed forms of each other,
        /// every guest gets an identity of its own in at most two tries each.
        #[test]
        fn no_names_make_keeping_guests_apart_super_linear(
            names in proptest::collection::vec(
                proptest::sample::select(vec!["a", "a#2", "a#3", "a#2#2", "a#2#3", "b", "b#2"]),
                1..3000,
            )
        ) {
            let mut identities = Identities::default();
            let distinct: HashSet<String> =
                names.iter().map(|n| identities.distinct(n.to_string())).collect();
            proptest::prop_assert_eq!(distinct.len(), names.len());
            proptest::prop_assert!(identities.tries <= 2 * names.len());
        }
    }

    #[test]
    fn guests_sharing_a_name_on_one_host_stay_apart() {
        let mut r = report();
        let mut g = r["guests"][0].clone();
        g.as_object_mut().unwrap().remove("uuid");
        g["pid"] = json!(43);
        let mut g2 = g.clone();
        g2["pid"] = json!(44);
        r["guests"] = json!([g, g2]);
        let v = check(r).unwrap();
        assert_eq!(v.guests[0].identity, "name:web");
        assert_eq!(v.guests[1].identity, "name:web#2");
        // A third VM really called "web#2" (no UUID) still gets an identity of its own.
        let mut r = report();
        let mut g = r["guests"][0].clone();
        g.as_object_mut().unwrap().remove("uuid");
        let mut g3 = g.clone();
        g3["name"] = json!("web#2");
        r["guests"] = json!([g.clone(), g3, g]);
        let ids: Vec<String> = check(r)
            .unwrap()
            .guests
            .into_iter()
            .map(|g| g.identity)
            .collect();
        assert_eq!(ids, ["name:web", "name:web#2", "name:web#3"]);
    }
}
