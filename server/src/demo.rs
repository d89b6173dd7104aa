//! A simulated fleet for `serve --demo`, so a newcomer's first command shows a populated
//! dashboard. Its reports go through the same validation and storage as an agent's; the figures
//! follow what real guests measured on the reference machine (DESIGN.md §2), with noise.
//! Every page says the data is simulated.

use std::time::Duration;

use tickscope_agent::wire::{
    AgentInfo, DeliveredFacts, Dynticks, FactsSource, GuestFacts, GuestSample, HostInfo,
    Hypervisor, Interval, KernelConfig, Report, WakeupsSource,
};

use crate::app::AppState;
use crate::app::now_ms;
use crate::auth::{self, UserRole};
use crate::error::{AppError, AppResult};
use crate::ingest;

const INTERVAL_MS: i64 = 10_000;
/// The demo's login, shown on its login page.
pub const DEMO_USER: &str = "demo";
pub const DEMO_PASSWORD: &str = "demo-password";
/// Reports written at start-up, so the figures average over a full window at once.
const BACKFILL_INTERVALS: i64 = 36;

/// A simulated guest: (name, hypervisor, vCPUs, host CPU % per vCPU, wake-ups per vCPU per s,
/// kernel command line visible on the host).
type GuestSpec = (
    &'static str,
    Hypervisor,
    u32,
    f64,
    f64,
    Option<&'static str>,
);

const HOSTS: &[(&str, u32, &[GuestSpec])] = &[
    (
        "demo-hv-01",
        32,
        &[
            ("web-01", Hypervisor::Qemu, 2, 0.2, 21.0, None),
            ("web-02", Hypervisor::Qemu, 2, 0.25, 24.0, None),
            ("db-legacy", Hypervisor::Qemu, 4, 4.1, 1004.0, None),
            (
                "ci-runner",
                Hypervisor::Qemu,
                1,
                5.3,
                650.0,
                Some("console=ttyS0 nohz=off"),
            ),
            ("build-box", Hypervisor::Qemu, 2, 78.0, 300.0, None),
        ],
    ),
    (
        "demo-hv-02",
        16,
        &[
            ("slitaz-justX", Hypervisor::Virtualbox, 1, 4.5, 1000.0, None),
            (
                "ubuntu-6.10-server",
                Hypervisor::Vmware,
                1,
                0.9,
                100.0,
                None,
            ),
            ("fedora-core-6", Hypervisor::Vmware, 1, 4.8, 1000.0, None),
            (
                "rt-lab",
                Hypervisor::Qemu,
                1,
                99.3,
                485.0,
                Some("idle=poll quiet"),
            ),
        ],
    ),
    (
        "demo-hv-03",
        64,
        &[
            ("fn-thumbnail", Hypervisor::Firecracker, 1, 0.3, 38.0, None),
            ("fn-resize", Hypervisor::Firecracker, 1, 0.35, 41.0, None),
            (
                "edge-proxy",
                Hypervisor::CloudHypervisor,
                2,
                4.6,
                262.0,
                Some("console=hvc0 nohz=off highres=off"),
            ),
        ],
    ),
];

/// The CI runner runs a 20 s job every two minutes, at 90 % of its vCPU: its idle intervals show
/// the tick's waste, and its busy ones are left out of it.
fn job_cpu_pct(name: &str, end_ms: i64) -> Option<f64> {
    (name == "ci-runner" && (end_ms / INTERVAL_MS) % 12 < 2).then_some(90.0)
}

/// Fills the server's database with a backfill of reports, then keeps the fleet reporting every
/// 10 s. Refuses a database that real agents have reported to.
pub async fn start(state: &AppState) -> AppResult<()> {
    let db = &state.db;
    let real_hosts = db.count_hosts_not_like("demo-hv-%").await?;
    if real_hosts > 0 {
        return Err(AppError::BadRequest(format!(
            "this database already holds {real_hosts} real host(s); the demo needs a database of its own (--db)"
        )));
    }
    let (reports_before, _) = db.count_reports_and_samples().await?;
    // A login for the demo, named on its login page: the database holds simulated data only.
    // A database with other users is someone's real one.
    let others = db
        .users()
        .await?
        .into_iter()
        .filter(|u| u.name != DEMO_USER)
        .count();
    if others > 0 {
        return Err(AppError::BadRequest(format!(
            "this database already has {others} user(s); the demo needs a database of its own (--db)"
        )));
    }
    if db.user_by_name(DEMO_USER).await?.is_none() {
        let hash = auth::hash_password(DEMO_PASSWORD)?;
        db.insert_user(DEMO_USER, UserRole::Admin.as_str(), &hash, now_ms())
            .await?;
    }
    // Reports are stored against a token bound to their host, as an agent's are; these tokens
    // are never shown, so nothing else can use them.
    let mut token_ids = Vec::new();
    for (host, _, _) in HOSTS {
        let token = auth::new_token()?;
        let id = db
            .insert_token(
                &format!("{host} (simulated)"),
                "agent",
                &auth::token_hash(&token),
                Some(host),
                now_ms(),
            )
            .await?;
        token_ids.push(id);
    }
    let mut fleet = Fleet {
        seq: 0,
        noise: Noise(now_ms() as u64 | 1),
        run_id: format!("demo-{}", now_ms()),
        token_ids,
    };
    // A demo database opened again keeps its history and simply goes on reporting.
    if reports_before == 0 {
        let now = now_ms();
        for i in (0..BACKFILL_INTERVALS).rev() {
            fleet.report_all(state, now - i * INTERVAL_MS).await?;
        }
    }
    let state = state.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_millis(INTERVAL_MS as u64));
        ticker.tick().await;
        loop {
            ticker.tick().await;
            if let Err(e) = fleet.report_all(&state, now_ms()).await {
                tracing::warn!(error = %e, "demo fleet could not report");
            }
        }
    });
    Ok(())
}

struct Fleet {
    seq: u64,
    noise: Noise,
    run_id: String,
    /// One agent token per host of `HOSTS`, in order.
    token_ids: Vec<i64>,
}

impl Fleet {
    async fn report_all(&mut self, state: &AppState, end_ms: i64) -> AppResult<()> {
        for (i, (host, cpus, guests)) in HOSTS.iter().enumerate() {
            let token_id = self.token_ids[i];
            let report = self.report(host, *cpus, guests, end_ms);
            let valid = ingest::validate(report, now_ms())?;
            // Received when it ended, on the simulated timeline: the backfill's reports then
            // spread over the window as an agent's would, instead of arriving all at once.
            state.store_report(&valid, token_id, end_ms).await?;
        }
        Ok(())
    }

    fn report(&mut self, host: &str, cpus: u32, guests: &[GuestSpec], end_ms: i64) -> Report {
        self.seq += 1;
        let length_s = INTERVAL_MS as f64 / 1000.0;
        let guests = guests
            .iter()
            .enumerate()
            .map(
                |(i, &(name, hypervisor, vcpus, cpu_pct, wakeups, boot_args))| {
                    let v = f64::from(vcpus);
                    GuestSample {
                        hypervisor,
                        management: (hypervisor == Hypervisor::Qemu).then(|| "libvirt".to_string()),
                        name: name.to_string(),
                        uuid: Some(format!("00000000-0000-4000-8000-{:06}{:06}", cpus, i)),
                        pid: 10_000 + cpus * 100 + i as u32,
                        vcpus,
                        // A vCPU cannot use more than a whole core.
                        host_cpu_seconds: (job_cpu_pct(name, end_ms).unwrap_or(cpu_pct)
                            * self.noise.factor())
                        .min(100.0)
                            / 100.0
                            * v
                            * length_s,
                        vcpu_wakeups: (wakeups * v * length_s * self.noise.factor()) as u64,
                        wakeups_source: WakeupsSource::VcpuThreads,
                        boot_args: boot_args.map(str::to_string),
                        // The simulated hosts are KVM hosts; VirtualBox and VMware bring
                        // their own hypervisors.
                        uses_kvm: Some(matches!(
                            hypervisor,
                            Hypervisor::Qemu
                                | Hypervisor::Firecracker
                                | Hypervisor::CloudHypervisor
                        )),
                        facts: simulated_facts(name, end_ms),
                        // The demo's reports never go missing: nothing to measure across.
                        totals: None,
                    }
                },
            )
            .collect();
        Report {
            agent: AgentInfo {
                id: format!("{host}-simulated"),
                run_id: self.run_id.clone(),
                version: format!("{} (demo)", env!("CARGO_PKG_VERSION")),
            },
            seq: self.seq,
            host: HostInfo {
                name: host.to_string(),
                cpus,
                kernel: "6.1.0-57-amd64 (simulated)".into(),
                kvm_halt_poll_ns: Some(200_000),
                boot_id: None,
            },
            interval: Interval {
                start_ms: end_ms - INTERVAL_MS,
                end_ms,
                length_ns: INTERVAL_MS as u64 * 1_000_000,
            },
            guests,
            dropped_reports: 0,
        }
    }
}

/// What a few of the simulated guests report about themselves, as a guest probe would: a
/// tickless Debian, a RHEL 5 kernel built without NO_HZ at 1000 Hz, a Debian booted with
/// `nohz=off`. The others have no probe, as in a real fleet.
fn simulated_facts(name: &str, now_ms: i64) -> Option<DeliveredFacts> {
    let debian = |cmdline: &str, dynticks: u32, idle: f64| GuestFacts {
        collected_ms: Some(now_ms),
        kernel_release: Some("6.1.0-57-cloud-amd64".into()),
        kernel_version: Some("#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3".into()),
        distro_id: Some("debian".into()),
        distro_version_id: Some("12".into()),
        distro_name: Some("Debian GNU/Linux 12 (bookworm)".into()),
        config: KernelConfig {
            source: "boot_config".into(),
            hz: Some(250),
            hz_periodic: Some(false),
            no_hz_idle: Some(false),
            no_hz_full: Some(true),
            no_hz_legacy: Some(false),
        },
        measured_hz: Some(250.1),
        dynticks: Some(Dynticks {
            nohz_mode: vec![dynticks; 2],
            tick_stopped_cpus: if dynticks > 0 { 2 } else { 0 },
        }),
        cmdline: Some(cmdline.into()),
        clocksource: Some("kvm-clock".into()),
        available_clocksources: Some(vec!["kvm-clock".into(), "tsc".into(), "hpet".into()]),
        cpuidle_driver: Some("none".into()),
        cpuidle_governor: Some(if dynticks > 0 { "menu" } else { "ladder" }.into()),
        idle_fraction: Some(idle),
        // Delivered with every report, as the probe measures it: over the time since the last.
        idle_measured_s: Some(INTERVAL_MS as f64 / 1000.0),
        local_timer_irqs_per_cpu_s: Some(if dynticks > 0 { 12.0 } else { 250.0 }),
        cpus: Some(2),
        dmi_uuid: None,
    };
    let facts = match name {
        "web-01" => debian(
            "BOOT_IMAGE=/vmlinuz-6.1.0-57-cloud-amd64 root=/dev/vda1 ro quiet",
            2,
            0.993,
        ),
        // While its job runs, it says so.
        "ci-runner" => debian(
            "BOOT_IMAGE=/vmlinuz-6.1.0-57-cloud-amd64 root=/dev/vda1 ro console=ttyS0 nohz=off",
            0,
            if job_cpu_pct(name, now_ms).is_some() {
                0.1
            } else {
                0.989
            },
        ),
        "db-legacy" => GuestFacts {
            collected_ms: Some(now_ms),
            kernel_release: Some("2.6.18-398.el5".into()),
            distro_id: Some("centos".into()),
            distro_version_id: Some("5.11".into()),
            distro_name: Some("CentOS release 5.11 (Final)".into()),
            config: KernelConfig {
                source: "boot_config".into(),
                hz: Some(1000),
                ..KernelConfig::default()
            },
            cmdline: Some("ro root=/dev/VolGroup00/LogVol00 rhgb quiet".into()),
            clocksource: Some("acpi_pm".into()),
            idle_fraction: Some(0.975),
            cpus: Some(4),
            ..GuestFacts::default()
        },
        _ => return None,
    };
    Some(DeliveredFacts {
        source: FactsSource::ProbeChannel,
        received_ms: now_ms,
        facts,
    })
}

/// A small deterministic generator for ±10 % noise: no RNG crate for a demo.
struct Noise(u64);

impl Noise {
    fn factor(&mut self) -> f64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        0.9 + 0.2 * (self.0 % 10_000) as f64 / 10_000.0
    }
}
