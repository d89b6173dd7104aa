//! Per-interval measurement of every VM on the host.
//!
//! Each call to [`Sampler::cycle`] reads the VMs' counters once and returns what changed since the
//! previous call. Cost matters more than anything here (the agent must not become the noisy
//! neighbour it hunts for), so a process is identified once and remembered, and a VM's counter
//! files are kept open and re-read with one `pread` each: in steady state a VM costs one read of
//! its `stat` and one of each vCPU thread's `schedstat` per cycle, and every other process costs
//! nothing but its directory entry.
//!
//! This module drives the cycle; what it remembers of each process is in `tracked`, and each
//! step has a module of its own: `identify` (a new process), `threads` (vCPU threads and their
//! switches), `cpu_time` (the process's CPU counter), `facts` (what guests say), `sample` (the
//! interval's figures) and `unseen` (the blind spots).

mod cpu_time;
mod facts;
mod halt_poll;
mod identify;
mod platform;
mod sample;
mod threads;
mod tracked;
mod unseen;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::clock::SampleClock;
use crate::cpu::CgroupMounts;
use crate::procfs::{ProcFs, ProcStat};
use crate::wire::{BlindSpot, GuestSample};

pub use facts::DEFAULT_LIBVIRT_URI;
pub use halt_poll::DEFAULT_DEBUGFS;
use identify::Identifier;
use tracked::{Counters, Tracked, VmState};
use unseen::{HostSight, denied_sockets};

/// Every this many cycles, processes remembered as "not a VM" are looked at again (a pid may have
/// been reused by a new VM between two cycles), and VMs' thread names are read again.
const FULL_RESCAN_EVERY_CYCLES: u64 = 30;

/// What one cycle measured since the previous one.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Unix time in milliseconds of the previous cycle.
    pub start_ms: i64,
    /// Unix time in milliseconds of this cycle.
    pub end_ms: i64,
    /// Exact time between the two cycles, from the monotonic clock.
    pub length: Duration,
    /// VMs present at both cycles.
    pub guests: Vec<GuestSample>,
    /// What the agent could not see this cycle, with the fixes.
    pub blind_spots: Vec<BlindSpot>,
}

pub struct Sampler {
    proc: ProcFs,
    /// The settings new VMs are identified with.
    identifier: Identifier,
    clk_tck: f64,
    processes: HashMap<u32, Tracked>,
    cycles: u64,
    last: Option<(Instant, i64)>,
    /// Where "now" comes from: the wall clock, or a test's clock.
    clock: SampleClock,
    /// Whether `/proc` hides other users' processes, and why libvirt could not be reached:
    /// looked at on the first cycle and on every full rescan.
    host_sight: HostSight,
    /// Where debugfs is mounted: KVM's halt-polling counters are there.
    debugfs: PathBuf,
}

impl Sampler {
    /// `clk_tck` is the kernel's `USER_HZ` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
    pub fn new(proc_root: impl AsRef<Path>, clk_tck: u64) -> Self {
        let mut proc = ProcFs::new(proc_root.as_ref());
        let cgroup_mounts = proc
            .own_mountinfo()
            .map(|m| CgroupMounts::from_mountinfo(&m))
            .unwrap_or_default();
        Sampler {
            proc,
            identifier: Identifier {
                channel_dir: None,
                libvirt_uri: DEFAULT_LIBVIRT_URI.to_string(),
                cgroup_mounts,
            },
            clk_tck: clk_tck.max(1) as f64,
            processes: HashMap::new(),
            cycles: 0,
            last: None,
            clock: SampleClock::system(),
            host_sight: HostSight::default(),
            debugfs: PathBuf::from(halt_poll::DEFAULT_DEBUGFS),
        }
    }

    /// Reads KVM's halt-polling counters under `dir` instead of `/sys/kernel/debug`.
    pub fn with_debugfs(mut self, dir: impl Into<PathBuf>) -> Self {
        self.debugfs = dir.into();
        self
    }

    /// Looks for probe channels of VMs that do not name one as `<dir>/<uuid>.sock` or
    /// `<dir>/<name>.sock` (VirtualBox and VMware serial ports set to a host pipe, say).
    pub fn with_channel_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.identifier.channel_dir = Some(dir.into());
        self
    }

    /// Files in `/proc` read so far: per cycle, in steady state, one `stat` per VM and one
    /// `schedstat` per counted thread.
    pub fn proc_files_read(&self) -> u64 {
        self.proc.files_read()
    }

    /// Reads the time from `clock` (a test's manual clock) instead of the wall clock.
    pub fn with_clock(mut self, clock: SampleClock) -> Self {
        self.clock = clock;
        self
    }

    /// Asks libvirt's guest-info API over `uri` instead of `qemu:///system`.
    pub fn with_libvirt_uri(mut self, uri: impl Into<String>) -> Self {
        self.identifier.libvirt_uri = uri.into();
        self
    }

    /// Reads every VM's counters now. Returns `None` on the first call, which only sets the
    /// starting point.
    pub fn cycle(&mut self) -> std::io::Result<Option<Measured>> {
        let (now, now_ms) = self.clock.now();
        self.cycles += 1;
        let pids = self.proc.pids()?;
        let present: HashSet<u32> = pids.iter().copied().collect();
        let full_rescan = self.cycles.is_multiple_of(FULL_RESCAN_EVERY_CYCLES);
        self.processes.retain(|pid, tracked| {
            present.contains(pid) && !(full_rescan && matches!(tracked, Tracked::Other { .. }))
        });

        let mut guests = Vec::new();
        for pid in pids {
            let Some(stat) = self.vm_stat(pid, full_rescan) else {
                continue;
            };
            let Some(vm) = self.processes.get_mut(&pid).and_then(Tracked::vm_mut) else {
                continue;
            };
            let counted = threads::count_threads(&mut self.proc, pid, vm, stat.num_threads);
            let Some(cpu_ns) = cpu_time::read_cpu_ns(
                &mut self.proc,
                pid,
                vm,
                (stat.cpu_ticks, self.clk_tck),
                &counted.run_ns,
            ) else {
                // Its cgroup went away with it (the process is ending): no sample, and none
                // measured later from the counters before the gap.
                vm.previous = None;
                continue;
            };
            // Counters that could not be read are tried again on the next full rescan only:
            // debugfs closed to the agent stays closed.
            let halt_poll_ns = vm
                .kvm_vm_fd
                .filter(|_| !vm.halt_poll_unreadable)
                .and_then(|fd| halt_poll::polled_ns(&halt_poll::vm_dir(&self.debugfs, pid, fd)));
            vm.halt_poll_unreadable = vm.kvm_vm_fd.is_some() && halt_poll_ns.is_none();
            let counters = Counters {
                cpu_ns,
                switches: counted.switches,
                part_run_ns: counted.run_ns,
                halt_poll_ns,
            };
            facts::poll_probe_channel(vm, now_ms);
            if let Some(previous) = vm.previous.take() {
                let vcpus_and_source = (counted.vcpus, counted.source);
                guests.push(sample::sample(
                    pid,
                    vm,
                    &previous,
                    &counters,
                    vcpus_and_source,
                ));
            }
            vm.previous = Some(counters);
        }

        // Definitions and guest agents are asked only now, after every VM's counters were read.
        platform::read_libvirt_metadata(
            self.processes.values_mut().filter_map(Tracked::vm_mut),
            &self.identifier.libvirt_uri,
        );
        facts::ask_guest_agents(
            self.processes.values_mut().filter_map(Tracked::vm_mut),
            self.cycles,
            &self.clock,
        );

        let vms: Vec<&VmState> = self.processes.values().filter_map(Tracked::vm).collect();
        let blind_spots = self.host_sight.blind_spots(
            self.proc.root(),
            &self.identifier.libvirt_uri,
            &vms,
            self.cycles == 1 || full_rescan,
        );
        let measured = self.last.map(|(then, then_ms)| Measured {
            start_ms: then_ms,
            end_ms: now_ms,
            length: now.duration_since(then),
            guests,
            blind_spots,
        });
        self.last = Some((now, now_ms));
        Ok(measured)
    }

    /// The stat of process `pid` if it is a VM to be read this cycle, identifying it first if it
    /// is new; `None` for a process that is not a VM, or that exited.
    fn vm_stat(&mut self, pid: u32, full_rescan: bool) -> Option<ProcStat> {
        let known = match self.processes.get_mut(&pid) {
            Some(Tracked::Other {
                comm,
                rechecks_left,
            }) => {
                if *rechecks_left == 0 {
                    return None;
                }
                *rechecks_left -= 1;
                match self.proc.stat(pid) {
                    Some(stat) if stat.comm != *comm => None, // exec'd: identify again
                    _ => return None,
                }
            }
            Some(Tracked::Vm(vm)) => {
                if full_rescan {
                    vm.threads.clear();
                    // QEMU creates its KVM VM just after it starts, and a vhost device when a
                    // NIC is added: looked at again until both are found.
                    if vm.uses_kvm != Some(true) || !vm.holds_vhost {
                        let fds = self.proc.vm_fds(pid);
                        if vm.uses_kvm != Some(true) {
                            vm.uses_kvm = fds.map(|fds| fds.kvm_vm_fd.is_some());
                            vm.kvm_vm_fd = fds.and_then(|fds| fds.kvm_vm_fd);
                        }
                        vm.holds_vhost |= fds.is_some_and(|fds| fds.vhost);
                    }
                    vm.channels_denied = denied_sockets(&vm.identity);
                    vm.halt_poll_unreadable = false;
                    if vm.libvirt_metadata == tracked::Metadata::Failed {
                        vm.libvirt_metadata = tracked::Metadata::NotRead;
                    }
                }
                self.proc
                    .read_stat(&vm.stat)
                    .filter(|stat| stat.start_ticks == vm.start_ticks)
            }
            None => None,
        };
        if known.is_some() {
            return known;
        }
        // A new process, or a VM whose process has gone (its open stat no longer reads once the
        // process exits, and a reused pid has another start time): identify whatever has this
        // pid now.
        let file = self.proc.open_stat(pid)?; // None: exited since the listing
        let stat = self.proc.read_stat(&file)?;
        let tracked = self
            .identifier
            .identify(&mut self.proc, pid, &stat, file, self.cycles);
        let is_vm = matches!(tracked, Tracked::Vm(_));
        self.processes.insert(pid, tracked);
        is_vm.then_some(stat)
    }
}
