//! The simulated guests and hosts, and the reports they make (their kernels, which tick as
//! measured, are in `kernel`).

use super::kernel::{Kernel, Tick};
use crate::wire::{
    AgentInfo, CpuParts, DeliveredFacts, GuestSample, HostInfo, Hypervisor, Interval, Platform,
    ProcessTotals, Report, VmConfig, WakeupsSource,
};

/// A simulated guest.
#[derive(Debug, Clone)]
pub struct GuestSpec {
    pub name: String,
    pub hypervisor: Hypervisor,
    pub vcpus: u32,
    pub kernel: Kernel,
    /// Share of its vCPUs busy at all hours, 0 to 1 (a build server, a database under load).
    pub base_load: f64,
    /// Share of its vCPUs busy at the peak of a working day, 0 to 1.
    pub day_load: f64,
    /// Chance that an interval is part of a batch job (90 % busy), at any hour.
    pub batch_share: f64,
    /// Whether it runs the guest probe, whose facts reach the server with the host's report.
    pub probe: bool,
    /// Whether its kernel is booted directly by the hypervisor (QEMU `-kernel -append`,
    /// Firecracker, cloud-hypervisor), so the host agent sees its command line.
    pub direct_boot: bool,
    /// Restarts per day, on average.
    pub restarts_per_day: f64,
    /// When it gets a tickless kernel (and restarts), Unix ms, if ever.
    pub upgrade_at_ms: Option<i64>,
    /// What its command line shows of its setup, where not a QEMU Linux domain's default (no
    /// Hyper-V enlightenments, the default HPET).
    pub vm_config: Option<VmConfig>,
    /// Host CPU its I/O thread spends at all hours, in % of a core (an I/O thread that polls).
    pub iothread_cpu_pct: f64,
    /// Host CPU KVM spends halt-polling its vCPUs while it idles, in % of a core; reported
    /// where its host's agent reads KVM's debugfs.
    pub halt_poll_cpu_pct: f64,
    /// Who it is on its platform, as its agent reads it.
    pub platform: Option<Platform>,
}

/// A simulated host and its guests.
#[derive(Debug, Clone)]
pub struct HostSpec {
    pub name: String,
    pub cpus: u32,
    /// Whether its agent reads KVM's debugfs (as root): it then counts the halt polling of
    /// every KVM guest, none for most, as a real agent does.
    pub reads_kvm_debugfs: bool,
    pub guests: Vec<GuestSpec>,
}

/// Picks a fleet at random from `seed`: hosts named `{prefix}-0001` on, each with
/// `guests_per_host` guests in the proportions of a fleet that was never audited.
pub fn random_fleet(
    seed: u64,
    prefix: &str,
    hosts: usize,
    guests_per_host: usize,
    start_ms: i64,
    run_ms: i64,
) -> Vec<HostSpec> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (1..=hosts)
        .map(|h| {
            // Drawn before the guests, as always, so that a seed gives the fleet it gave.
            let drawn_cpus = [32, 64, 128][rng.usize(0..3)];
            let guests: Vec<GuestSpec> = (1..=guests_per_host)
                .map(|g| random_guest(&mut rng, format!("vm-{h:04}-{g:03}"), start_ms, run_ms))
                .collect();
            // A guest uses at most all of its vCPUs: a host with as many CPUs as its guests
            // have vCPUs never reports more CPU time than it has (the server refuses that).
            let vcpus: u32 = guests.iter().map(|g| g.vcpus).sum();
            HostSpec {
                name: format!("{prefix}-{h:04}"),
                cpus: drawn_cpus.max(vcpus),
                reads_kvm_debugfs: false,
                guests,
            }
        })
        .collect()
}

fn random_guest(rng: &mut fastrand::Rng, name: String, start_ms: i64, run_ms: i64) -> GuestSpec {
    let kernel = match rng.u32(0..100) {
        0..=59 => Kernel::debian("", Tick::Tickless { hz: 250 }),
        60..=71 => Kernel::debian(" nohz=off", Tick::Periodic { hz: 250 }),
        72..=83 => Kernel::centos5(),
        84..=91 => Kernel::ubuntu_server_2006(),
        92..=93 => Kernel::debian(" idle=poll", Tick::Polling { hz: 250 }),
        _ => Kernel::debian("", Tick::Tickless { hz: 1000 }),
    };
    let ticking = !matches!(kernel.tick, Tick::Tickless { .. });
    let hypervisor = match rng.u32(0..20) {
        0 => Hypervisor::Firecracker,
        1 => Hypervisor::CloudHypervisor,
        _ => Hypervisor::Qemu,
    };
    GuestSpec {
        name,
        hypervisor,
        vcpus: [1, 1, 2, 2, 2, 4, 4, 8][rng.usize(0..8)],
        base_load: if rng.u32(0..50) == 0 { 0.7 } else { 0.0 },
        // Most guests idle most of the time; a few work hard all day.
        day_load: if rng.u32(0..10) == 0 {
            0.5 + 0.4 * rng.f64()
        } else {
            0.1 * rng.f64()
        },
        batch_share: 0.02 * rng.f64(),
        probe: rng.bool(),
        direct_boot: hypervisor != Hypervisor::Qemu || rng.u32(0..5) == 0,
        restarts_per_day: 0.05,
        upgrade_at_ms: (ticking && rng.u32(0..4) == 0)
            .then(|| start_ms + (rng.f64() * run_ms as f64) as i64),
        kernel,
        vm_config: None,
        iothread_cpu_pct: 0.0,
        halt_poll_cpu_pct: 0.0,
        platform: None,
    }
}

/// A running simulated VM process.
#[derive(Debug, Clone)]
struct Process {
    pid: u32,
    start_ticks: u64,
    cpu_s_total: f64,
    wakeups_total: u64,
    /// The agent skips a VM at its first cycle: it has no previous counters yet.
    new: bool,
}

#[derive(Debug, Clone)]
struct GuestState {
    spec: GuestSpec,
    kernel: Kernel,
    process: Process,
    /// Reports since the probe last delivered facts.
    since_facts: u32,
}

/// A host whose agent reports the simulated guests.
pub struct SimulatedHost {
    spec: HostSpec,
    guests: Vec<GuestState>,
    rng: fastrand::Rng,
    agent: AgentInfo,
    boot_id: String,
    seq: u64,
    next_pid: u32,
    /// Where the previous report ended: the next one starts there, as an agent's intervals
    /// follow one another.
    last_end_ms: Option<i64>,
}

/// What QEMU's main loop costs an idle VM, in % of a core.
const EMULATOR_CPU_PCT: f64 = 0.1;

/// The probe delivers facts every this many reports (a minute at 10 s).
const FACTS_EVERY_REPORTS: u32 = 6;

impl SimulatedHost {
    pub fn new(spec: HostSpec, seed: u64, version: &str) -> SimulatedHost {
        let mut rng = fastrand::Rng::with_seed(seed);
        let boot_id = random_uuid(&mut rng);
        let mut next_pid = 1000 + rng.u32(0..1000);
        let guests = spec
            .guests
            .iter()
            .map(|g| {
                next_pid += 1;
                GuestState {
                    spec: g.clone(),
                    kernel: g.kernel.clone(),
                    process: Process {
                        pid: next_pid,
                        start_ticks: u64::from(rng.u32(1000..100_000)),
                        cpu_s_total: 0.0,
                        wakeups_total: 0,
                        new: false,
                    },
                    since_facts: rng.u32(0..FACTS_EVERY_REPORTS),
                }
            })
            .collect();
        SimulatedHost {
            agent: AgentInfo {
                id: format!("{}-simulated", spec.name),
                run_id: random_uuid(&mut rng),
                version: version.into(),
            },
            spec,
            guests,
            rng,
            boot_id,
            seq: 0,
            next_pid,
            last_end_ms: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The report of the interval that ends at `end_ms`: since the previous report, or
    /// `length_ms` long for the first.
    pub fn report(&mut self, end_ms: i64, length_ms: i64) -> Report {
        let start_ms = self
            .last_end_ms
            .filter(|&last| last < end_ms)
            .unwrap_or(end_ms - length_ms);
        self.last_end_ms = Some(end_ms);
        let length_ms = end_ms - start_ms;
        let length_s = length_ms as f64 / 1000.0;
        let mut samples = Vec::new();
        for i in 0..self.guests.len() {
            if let Some(sample) = self.step(i, start_ms, end_ms, length_s) {
                samples.push(sample);
            }
        }
        let report = Report {
            agent: self.agent.clone(),
            seq: self.seq,
            host: HostInfo {
                name: self.spec.name.clone(),
                cpus: self.spec.cpus,
                kernel: "6.1.0-57-amd64 (simulated)".into(),
                kvm_halt_poll_ns: Some(200_000),
                boot_id: Some(self.boot_id.clone()),
                blind_spots: Vec::new(),
            },
            interval: Interval {
                start_ms,
                end_ms,
                length_ns: u64::try_from(length_ms).unwrap_or(0) * 1_000_000,
            },
            guests: samples,
            dropped_reports: 0,
        };
        self.seq += 1;
        report
    }

    /// One guest over one interval; `None` for a VM that just (re)started.
    fn step(&mut self, i: usize, start_ms: i64, end_ms: i64, length_s: f64) -> Option<GuestSample> {
        let reads_kvm_debugfs = self.spec.reads_kvm_debugfs;
        let rng = &mut self.rng;
        let g = &mut self.guests[i];
        let day_s = 86_400.0;
        if let Some(at) = g.spec.upgrade_at_ms
            && (start_ms..end_ms).contains(&at)
        {
            g.kernel = g.kernel.upgraded();
            self.next_pid += 1;
            g.process = restarted(self.next_pid, &g.process, end_ms);
            g.since_facts = FACTS_EVERY_REPORTS;
        } else if rng.f64() < g.spec.restarts_per_day * length_s / day_s {
            self.next_pid += 1;
            g.process = restarted(self.next_pid, &g.process, end_ms);
        }
        let busy = load(&g.spec, rng, end_ms);
        let vcpus = f64::from(g.spec.vcpus);
        let (idle_cpu_pct, idle_wakeups) = g.kernel.tick.idle_cost();
        let noise = |rng: &mut fastrand::Rng| 0.9 + 0.2 * rng.f64();
        // A busy vCPU uses its core and wakes for its work; an idle one costs its tick.
        let cpu_pct_per_vcpu = idle_cpu_pct * (1.0 - busy) + 100.0 * busy;
        // KVM's polling for its halted vCPUs is vCPU time, while it idles.
        let polled_s = g.spec.halt_poll_cpu_pct / 100.0 * (1.0 - busy) * length_s;
        let vm_cpu_s =
            (cpu_pct_per_vcpu * noise(rng)).min(100.0) / 100.0 * vcpus * length_s + polled_s;
        // QEMU's threads as the agent splits them: of what a VM costs as measured, its main
        // loop a tenth of a percent of a core, the rest its vCPUs; an I/O thread that polls
        // costs on top.
        let iothreads_s = g.spec.iothread_cpu_pct / 100.0 * length_s;
        let host_cpu_s = vm_cpu_s + iothreads_s;
        let cpu_parts = (g.spec.hypervisor == Hypervisor::Qemu).then(|| {
            let emulator_s = (EMULATOR_CPU_PCT / 100.0 * length_s).min(vm_cpu_s / 2.0);
            CpuParts {
                vcpus_s: vm_cpu_s - emulator_s,
                iothreads_s,
                vhost_s: 0.0,
                emulator_s,
            }
        });
        let wakeups_per_vcpu = idle_wakeups * (1.0 - busy) + 1500.0 * busy;
        let vcpu_wakeups = (wakeups_per_vcpu * noise(rng) * vcpus * length_s) as u64;
        g.process.cpu_s_total += host_cpu_s;
        g.process.wakeups_total += vcpu_wakeups;
        g.since_facts += 1;
        if std::mem::take(&mut g.process.new) {
            return None;
        }
        let facts = (g.spec.probe && g.since_facts >= FACTS_EVERY_REPORTS).then(|| {
            let measured_s = f64::from(g.since_facts) * length_s;
            g.since_facts = 0;
            DeliveredFacts {
                source: g.kernel.facts_source,
                received_ms: end_ms,
                facts: g.kernel.facts(g.spec.vcpus, 1.0 - busy, measured_s, end_ms),
            }
        });
        let boot_args = g.spec.direct_boot.then(|| g.kernel.cmdline.clone());
        let uses_kvm = matches!(
            g.spec.hypervisor,
            Hypervisor::Qemu | Hypervisor::Firecracker | Hypervisor::CloudHypervisor
        );
        Some(GuestSample {
            hypervisor: g.spec.hypervisor,
            // QEMU under libvirt, or Proxmox VE's where the VM is one of its.
            management: (g.spec.hypervisor == Hypervisor::Qemu).then(|| {
                match g.spec.platform.as_ref().map(|p| p.kind.as_str()) {
                    Some("proxmox") => "proxmox".to_string(),
                    _ => "libvirt".to_string(),
                }
            }),
            name: g.spec.name.clone(),
            uuid: None,
            pid: g.process.pid,
            vcpus: g.spec.vcpus,
            host_cpu_seconds: host_cpu_s,
            cpu_source: None,
            vcpu_wakeups,
            wakeups_source: WakeupsSource::VcpuThreads,
            boot_args,
            uses_kvm: Some(uses_kvm),
            // What a libvirt Linux domain's command line says: no Hyper-V set, the default HPET.
            cpu_parts,
            halt_poll_seconds: (reads_kvm_debugfs && uses_kvm).then_some(polled_s),
            platform: g.spec.platform.clone(),
            vm_config: g.spec.vm_config.clone().or_else(|| {
                (g.spec.hypervisor == Hypervisor::Qemu).then(|| VmConfig {
                    hyperv: Some(Vec::new()),
                    hpet: Some(true),
                    os_hint: None,
                })
            }),
            facts,
            totals: Some(ProcessTotals {
                start_ticks: g.process.start_ticks,
                host_cpu_seconds: g.process.cpu_s_total,
                vcpu_wakeups: g.process.wakeups_total,
            }),
        })
    }
}

/// Share of the guest's vCPUs busy in the interval ending at `end_ms`: its steady load, its
/// working day (UTC, 7 to 19 h, busiest at 13 h), or a batch job at any hour.
fn load(spec: &GuestSpec, rng: &mut fastrand::Rng, end_ms: i64) -> f64 {
    let hour = (end_ms.rem_euclid(86_400_000)) as f64 / 3_600_000.0;
    let day = ((hour - 7.0) / 12.0 * std::f64::consts::PI).sin().max(0.0);
    let working = spec.day_load * day * (0.7 + 0.6 * rng.f64());
    let batch = if rng.f64() < spec.batch_share {
        0.9
    } else {
        0.0
    };
    let steady = spec.base_load * (0.9 + 0.2 * rng.f64());
    working.max(batch).max(steady).min(1.0)
}

fn restarted(pid: u32, old: &Process, end_ms: i64) -> Process {
    Process {
        pid,
        // Clock ticks (1/100 s) since the host booted; only its change matters.
        start_ticks: old.start_ticks + 1 + (end_ms as u64 / 10) % 1_000_000,
        cpu_s_total: 0.0,
        wakeups_total: 0,
        new: true,
    }
}

fn random_uuid(rng: &mut fastrand::Rng) -> String {
    let hex = |n: usize, rng: &mut fastrand::Rng| -> String {
        (0..n)
            .map(|_| char::from_digit(rng.u32(0..16), 16).unwrap_or('0'))
            .collect()
    };
    format!(
        "{}-{}-4{}-8{}-{}",
        hex(8, rng),
        hex(4, rng),
        hex(3, rng),
        hex(3, rng),
        hex(12, rng)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: i64 = 86_400_000;
    /// 2026-12-03 00:00 UTC.
    const MIDNIGHT: i64 = 1_796_256_000_000;

    fn guest(kernel: Kernel, day_load: f64) -> GuestSpec {
        GuestSpec {
            name: "g".into(),
            hypervisor: Hypervisor::Qemu,
            vcpus: 2,
            kernel,
            base_load: 0.0,
            day_load,
            batch_share: 0.0,
            probe: true,
            direct_boot: false,
            restarts_per_day: 0.0,
            upgrade_at_ms: None,
            vm_config: None,
            iothread_cpu_pct: 0.0,
            halt_poll_cpu_pct: 0.0,
            platform: None,
        }
    }

    fn host(guests: Vec<GuestSpec>) -> SimulatedHost {
        SimulatedHost::new(
            HostSpec {
                name: "h".into(),
                cpus: 32,
                reads_kvm_debugfs: false,
                guests,
            },
            7,
            "test",
        )
    }

    /// Host CPU in % of a core and wake-ups per vCPU per second of guest 0 at night.
    fn idle_rates(kernel: Kernel) -> (f64, f64) {
        let mut h = host(vec![guest(kernel, 0.5)]);
        let r = h.report(MIDNIGHT + 3_600_000, 10_000);
        let g = &r.guests[0];
        (
            100.0 * g.host_cpu_seconds / 10.0,
            g.vcpu_wakeups as f64 / 2.0 / 10.0,
        )
    }

    #[test]
    fn idle_guests_cost_what_their_tick_mode_costs() {
        // (kernel, host CPU % of a core for 2 vCPUs, wake-ups per vCPU per s), ±10 % noise.
        let cases = [
            (Kernel::debian("", Tick::Tickless { hz: 250 }), 0.6, 37.0),
            (
                Kernel::debian(" nohz=off", Tick::Periodic { hz: 250 }),
                2.95,
                250.0,
            ),
            (Kernel::centos5(), 10.0, 1000.0),
            (Kernel::ubuntu_server_2006(), 1.54, 100.0),
            (
                Kernel::debian(" idle=poll", Tick::Polling { hz: 250 }),
                198.6,
                485.0,
            ),
        ];
        for (kernel, cpu_pct, wakeups) in cases {
            let name = kernel.cmdline.clone();
            let (cpu, w) = idle_rates(kernel);
            assert!(
                (cpu / cpu_pct - 1.0).abs() <= 0.11,
                "{name}: {cpu} vs {cpu_pct}"
            );
            assert!(
                (w / wakeups - 1.0).abs() <= 0.11,
                "{name}: {w} vs {wakeups}"
            );
        }
    }

    #[test]
    fn guests_work_in_the_day_and_idle_at_night() {
        let mut h = host(vec![guest(
            Kernel::debian("", Tick::Tickless { hz: 250 }),
            0.8,
        )]);
        let at = |h: &mut SimulatedHost, hour: i64| {
            h.report(MIDNIGHT + hour * 3_600_000, 10_000).guests[0].host_cpu_seconds
        };
        let noon = at(&mut h, 13);
        let night = at(&mut h, 2);
        assert!(noon > 50.0 * night, "noon {noon} s, night {night} s");
    }

    #[test]
    fn totals_grow_by_each_interval_and_start_again_after_a_restart() {
        let mut spec = guest(Kernel::centos5(), 0.0);
        spec.upgrade_at_ms = Some(MIDNIGHT + 25_000);
        let mut h = host(vec![spec]);
        let r1 = h.report(MIDNIGHT + 10_000, 10_000);
        let r2 = h.report(MIDNIGHT + 20_000, 10_000);
        let (g1, g2) = (&r1.guests[0], &r2.guests[0]);
        let (t1, t2) = (g1.totals.as_ref().unwrap(), g2.totals.as_ref().unwrap());
        assert_eq!(t2.vcpu_wakeups - t1.vcpu_wakeups, g2.vcpu_wakeups);
        assert!((t2.host_cpu_seconds - t1.host_cpu_seconds - g2.host_cpu_seconds).abs() < 1e-9);
        assert_eq!((r1.seq, r2.seq), (0, 1));
        // The upgrade restarts the VM: skipped once, as the agent does, then a new process
        // with a tickless kernel, its facts sent at once.
        assert!(h.report(MIDNIGHT + 30_000, 10_000).guests.is_empty());
        let r4 = h.report(MIDNIGHT + 40_000, 10_000);
        let g4 = &r4.guests[0];
        assert_ne!(g4.pid, g1.pid);
        assert_ne!(g4.totals.as_ref().unwrap().start_ticks, t1.start_ticks);
        assert!(g4.totals.as_ref().unwrap().host_cpu_seconds < t2.host_cpu_seconds);
        let facts = &g4.facts.as_ref().expect("facts after the upgrade").facts;
        assert_eq!(
            facts.kernel_release.as_deref(),
            Some("6.1.0-57-cloud-amd64")
        );
        assert!(g4.vcpu_wakeups < g2.vcpu_wakeups / 5);
    }

    #[test]
    fn a_random_fleet_is_the_same_for_the_same_seed_and_mixes_tick_modes() {
        let a = random_fleet(42, "sim", 10, 20, MIDNIGHT, DAY_MS);
        let b = random_fleet(42, "sim", 10, 20, MIDNIGHT, DAY_MS);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let guests: Vec<&GuestSpec> = a.iter().flat_map(|h| &h.guests).collect();
        assert_eq!(guests.len(), 200);
        let ticking = guests
            .iter()
            .filter(|g| !matches!(g.kernel.tick, Tick::Tickless { .. }))
            .count();
        assert!((40..=120).contains(&ticking), "{ticking} of 200 ticking");
        assert_eq!(a[0].name, "sim-0001");
    }

    #[test]
    fn no_random_host_has_fewer_cpus_than_its_guests_have_vcpus() {
        // 5,000 hosts of 20: the capacity benchmark's 100,000 guests, where a 32-CPU host
        // drew guests of up to 80 vCPUs and reported more CPU time than it has.
        let fleet = random_fleet(7, "sim", 5_000, 20, MIDNIGHT, DAY_MS);
        let crowded = fleet
            .iter()
            .filter(|h| h.guests.iter().map(|g| g.vcpus).sum::<u32>() > 32)
            .count();
        assert!(
            crowded > 0,
            "the fleet no longer has a crowded host to check"
        );
        for host in &fleet {
            let vcpus: u32 = host.guests.iter().map(|g| g.vcpus).sum();
            assert!(
                host.cpus >= vcpus,
                "{}: {} cpus, {vcpus} vCPUs",
                host.name,
                host.cpus
            );
            assert!([32, 64, 128].contains(&host.cpus) || host.cpus == vcpus);
        }
    }
}
