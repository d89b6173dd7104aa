//! A simulated fleet for `serve --demo`, so a newcomer's first command shows a populated
//! dashboard. The guests are a fixed cast driven by the same model as `tickscope-agent
//! simulate` (`tickscope_agent::simulate`: idle costs by tick mode from real measurements, a
//! working day, batch jobs, the probe's facts); their reports go through the same validation
//! and storage as an agent's. Every page says the data is simulated.

use std::time::Duration;

use tickscope_agent::simulate::{GuestSpec, HostSpec, Kernel, SimulatedHost, Tick};
use tickscope_wire::{Hypervisor, Platform, VmConfig};

use crate::analysis::platform::HYPERV_TIMER_SET;
use crate::auth::{self, UserRole};
use crate::error::{AppError, AppResult};
use crate::ingest;
use crate::state::AppState;

const INTERVAL_MS: i64 = 10_000;
/// The demo's login, shown on its login page.
pub const DEMO_USER: &str = "demo";
pub const DEMO_PASSWORD: &str = "demo-password";
/// Reports written at start-up, so the figures average over a full window at once.
const BACKFILL_INTERVALS: i64 = 36;

/// A guest of the cast: idle most of the time, unless said otherwise.
fn guest(name: &str, hypervisor: Hypervisor, vcpus: u32, kernel: Kernel) -> GuestSpec {
    GuestSpec {
        name: name.into(),
        hypervisor,
        vcpus,
        kernel,
        base_load: 0.0,
        day_load: 0.05,
        batch_share: 0.0,
        probe: false,
        // Firecracker and cloud-hypervisor always boot a kernel directly.
        direct_boot: matches!(
            hypervisor,
            Hypervisor::Firecracker | Hypervisor::CloudHypervisor
        ),
        restarts_per_day: 0.0,
        upgrade_at_ms: None,
        vm_config: None,
        iothread_cpu_pct: 0.0,
        halt_poll_cpu_pct: 0.0,
        platform: None,
    }
}

/// A Windows guest that qemu-guest-agent describes, on a VM with these Hyper-V enlightenments
/// and an HPET, which its manager calls `os`.
fn windows(g: GuestSpec, hyperv: &[&str], os: &str) -> GuestSpec {
    GuestSpec {
        probe: true,
        vm_config: Some(
            VmConfig {
                hyperv: Some(hyperv.iter().map(|f| f.to_string()).collect()),
                hpet: Some(true),
                os_hint: Some(os.into()),
            }
            .cleaned(),
        ),
        ..g
    }
}

/// The cast: the kinds of guest the seed reports and the measured guests of docs/measurements.md describe, on three hosts.
fn hosts() -> Vec<HostSpec> {
    use Hypervisor::{CloudHypervisor, Firecracker, Qemu, Virtualbox, Vmware};
    let tickless = || Kernel::debian("", Tick::Tickless { hz: 250 });
    let probed = |g: GuestSpec| GuestSpec { probe: true, ..g };
    // QEMU started with -kernel and -append: the host sees the command line.
    let direct = |g: GuestSpec| GuestSpec {
        direct_boot: true,
        ..g
    };
    vec![
        HostSpec {
            name: "demo-hv-01".into(),
            cpus: 32,
            // Its agent runs as root and reads KVM's debugfs: every guest's halt polling is counted.
            reads_kvm_debugfs: true,
            guests: vec![
                probed(guest("web-01", Qemu, 2, tickless())),
                guest("web-02", Qemu, 2, tickless()),
                probed(guest("db-legacy", Qemu, 4, Kernel::centos5())),
                // A 20 s job every two minutes or so: its busy intervals are left out of the
                // waste, its idle ones show the tick.
                direct(probed(GuestSpec {
                    batch_share: 0.17,
                    ..guest(
                        "ci-runner",
                        Qemu,
                        1,
                        Kernel::debian(" console=ttyS0 nohz=off", Tick::Periodic { hz: 250 }),
                    )
                })),
                GuestSpec {
                    base_load: 0.78,
                    ..guest("build-box", Qemu, 2, tickless())
                },
                // virt-manager's Windows defaults before it added stimer: no synthetic timers.
                windows(
                    guest("win-fileserver", Qemu, 2, Kernel::windows_server_2019()),
                    &["relaxed", "spinlocks", "time", "vapic"],
                    "http://microsoft.com/win/2k19",
                ),
                // Synthetic timers, but a program holds a 1 ms timer resolution.
                windows(
                    guest(
                        "win-desktop",
                        Qemu,
                        2,
                        Kernel {
                            tick: Tick::Emulated {
                                hz: 1000,
                                cpu_pct: 6.0,
                                wakeups: 1000.0,
                            },
                            distro_name: "Windows 10 Pro".into(),
                            distro_version: "10".into(),
                            release: "19045".into(),
                            ..Kernel::windows_server_2019()
                        },
                    ),
                    &HYPERV_TIMER_SET,
                    "http://microsoft.com/win/10",
                ),
                // Tickless, but its I/O thread polls for requests at 3 % of a core. Probed, as
                // cache-01 below, so that its tick is known: judged from the host's counters
                // alone, the CPU of its other threads made it look periodic in some runs (the
                // simulation is seeded from the clock, and its load follows the working day).
                probed(GuestSpec {
                    iothread_cpu_pct: 3.0,
                    ..guest("db-replica", Qemu, 2, tickless())
                }),
                // Tickless, but KVM polls 4 % of a core for its halted vCPUs (the agent reads
                // KVM's debugfs on this host).
                probed(GuestSpec {
                    halt_poll_cpu_pct: 4.0,
                    ..guest("cache-01", Qemu, 2, tickless())
                }),
                // An OpenStack instance: QEMU's name says nothing, Nova's metadata says who it is.
                GuestSpec {
                    platform: Some(Platform {
                        kind: "openstack".into(),
                        name: Some("web-frontend-3".into()),
                        group: Some("web-team".into()),
                        flavor: Some("m1.small".into()),
                        id: Some("5c7f3e2a-1d4b-4e8f-9a6c-0b1d2e3f4a5b".into()),
                    }),
                    ..guest("instance-0000a1b2", Qemu, 1, tickless())
                },
                // Booted `nolapic_timer` on a VM without HPET: its tick runs on the PIT.
                probed(GuestSpec {
                    vm_config: Some(VmConfig {
                        hyperv: Some(Vec::new()),
                        hpet: Some(false),
                        os_hint: None,
                    }),
                    ..guest("appliance-pit", Qemu, 1, Kernel::debian_on_the_pit())
                }),
            ],
        },
        HostSpec {
            name: "demo-hv-02".into(),
            cpus: 16,
            reads_kvm_debugfs: false,
            guests: vec![
                guest(
                    "slitaz-justX",
                    Virtualbox,
                    1,
                    Kernel::legacy(
                        "2.6.24.2-slitaz",
                        "slitaz",
                        "2.0",
                        "SliTaz GNU/Linux 2.0",
                        1000,
                    ),
                ),
                guest(
                    "ubuntu-6.10-server",
                    Vmware,
                    1,
                    Kernel::ubuntu_server_2006(),
                ),
                guest(
                    "fedora-core-6",
                    Vmware,
                    1,
                    Kernel::legacy(
                        "2.6.18-1.2798.fc6",
                        "fedora",
                        "6",
                        "Fedora Core release 6 (Zod)",
                        1000,
                    ),
                ),
                direct(guest(
                    "rt-lab",
                    Qemu,
                    1,
                    Kernel::debian(" idle=poll", Tick::Polling { hz: 250 }),
                )),
            ],
        },
        // A Proxmox VE node: a Windows VM of OS type win11, which has every Hyper-V flag, and
        // a program in it holding a 1 ms timer.
        HostSpec {
            name: "demo-hv-04".into(),
            cpus: 24,
            reads_kvm_debugfs: false,
            guests: vec![GuestSpec {
                platform: Some(Platform {
                    kind: "proxmox".into(),
                    name: Some("win-rdp-01".into()),
                    group: None,
                    flavor: None,
                    id: Some("105".into()),
                }),
                ..windows(
                    guest(
                        "win-rdp-01",
                        Qemu,
                        2,
                        Kernel {
                            tick: Tick::Emulated {
                                hz: 1000,
                                cpu_pct: 5.0,
                                wakeups: 1000.0,
                            },
                            ..Kernel::windows_server_2019()
                        },
                    ),
                    &[
                        "ipi",
                        "relaxed",
                        "reset",
                        "runtime",
                        "spinlocks",
                        "stimer",
                        "synic",
                        "time",
                        "vapic",
                        "vpindex",
                    ],
                    "win11",
                )
            }],
        },
        HostSpec {
            name: "demo-hv-03".into(),
            cpus: 64,
            reads_kvm_debugfs: false,
            guests: vec![
                guest("fn-thumbnail", Firecracker, 1, tickless()),
                guest("fn-resize", Firecracker, 1, tickless()),
                guest(
                    "edge-proxy",
                    CloudHypervisor,
                    2,
                    Kernel::debian(
                        " console=hvc0 nohz=off highres=off",
                        Tick::Periodic { hz: 250 },
                    ),
                ),
            ],
        },
    ]
}

/// Fills the server's database with a backfill of reports, then keeps the fleet reporting every
/// 10 s. Refuses a database that real agents have reported to. The simulation is seeded from the
/// clock, so that each demo differs a little, as a real fleet's days do.
pub async fn start(state: &AppState) -> AppResult<()> {
    start_seeded(state, state.clock.now_ms() as u64).await
}

/// [`start`] with the simulation's seed given: a test can then go through many seeds.
pub async fn start_seeded(state: &AppState, seed: u64) -> AppResult<()> {
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
        db.insert_user(DEMO_USER, UserRole::Admin, &hash, state.clock.now_ms())
            .await?;
    }
    // Reports are stored against a token bound to their host, as an agent's are; these tokens
    // are never shown, so nothing else can use them.
    let hosts = hosts();
    let mut token_ids = Vec::new();
    for host in hosts.iter().map(|h| h.name.as_str()) {
        let token = auth::new_token()?;
        let id = db
            .insert_token(
                &format!("{host} (simulated)"),
                crate::domain::TokenRole::Agent,
                &auth::token_hash(&token),
                Some(host),
                state.clock.now_ms(),
            )
            .await?;
        token_ids.push(id);
    }
    let version = format!("{} (demo)", env!("CARGO_PKG_VERSION"));
    let mut fleet = Fleet {
        hosts: hosts
            .into_iter()
            .enumerate()
            .map(|(i, spec)| SimulatedHost::new(spec, seed + i as u64, &version))
            .collect(),
        token_ids,
    };
    // A demo database opened again keeps its history and simply goes on reporting.
    if reports_before == 0 {
        let now = state.clock.now_ms();
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
            if let Err(e) = fleet.report_all(&state, state.clock.now_ms()).await {
                tracing::warn!(error = %e, "demo fleet could not report");
            }
        }
    });
    Ok(())
}

struct Fleet {
    hosts: Vec<SimulatedHost>,
    /// One agent token per host, in order.
    token_ids: Vec<crate::domain::TokenId>,
}

impl Fleet {
    async fn report_all(&mut self, state: &AppState, end_ms: i64) -> AppResult<()> {
        for (host, &token_id) in self.hosts.iter_mut().zip(&self.token_ids) {
            let report = host.report(end_ms, INTERVAL_MS);
            let valid = ingest::validate(report, state.clock.now_ms())?;
            // Received when it ended, on the simulated timeline: the backfill's reports then
            // spread over the window as an agent's would, instead of arriving all at once.
            state
                .ingest_report(std::sync::Arc::new(valid), token_id, end_ms)
                .await?;
        }
        Ok(())
    }
}
