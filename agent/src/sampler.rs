//! Per-interval measurement of every VM on the host.
//!
//! Each call to [`Sampler::cycle`] reads the VMs' counters once and returns what changed since the
//! previous call. Cost matters more than anything here (the agent must not become the noisy
//! neighbour it hunts for), so a process is identified once and remembered, and a VM's counter
//! files are kept open and re-read with one `pread` each: in steady state a VM costs one read of
//! its `stat` and one of each vCPU thread's `schedstat` per cycle, and every other process costs
//! nothing but its directory entry.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::blind_spots::{self, Seen};
use crate::channel::Channel;
use crate::clock::SampleClock;
use crate::cpu::{CgroupCpu, CgroupMounts};
use crate::discover::{self, Family, ProcessView, VmIdentity};
use crate::guest_agent::schedule::{GuestAgent, Via};
use crate::procfs::{OpenFile, ProcFs, SwitchesFile};
use crate::wire::{
    BlindSpot, CpuSource, DeliveredFacts, FactsSource, GuestSample, MAX_BOOT_ARGS_CHARS,
    MAX_LABEL_CHARS, MAX_NAME_CHARS, MAX_VCPUS, ProcessTotals, WakeupsSource, clean_text,
};

/// Every this many cycles, processes remembered as "not a VM" are looked at again (a pid may have
/// been reused by a new VM between two cycles), and VMs' thread names are read again.
const FULL_RESCAN_EVERY_CYCLES: u64 = 30;
/// The libvirt connection of the system's VMs (libvirtd or virtqemud as root).
pub const DEFAULT_LIBVIRT_URI: &str = "qemu:///system";
/// Longest time one cycle spends asking guest agents.
const GUEST_AGENT_BUDGET: Duration = Duration::from_secs(2);
/// Cycles during which a new process that is not a VM is looked at again: launchers (libvirt,
/// Proxmox) fork, prepare, then exec QEMU under the same pid, which changes its name.
const NEW_PROCESS_RECHECKS: u8 = 3;

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
    /// Where probe channel sockets are found by convention (`<uuid>.sock` or `<name>.sock`),
    /// for VMs whose command line does not name one.
    channel_dir: Option<PathBuf>,
    /// The libvirt connection guest agents of libvirt domains are asked through.
    libvirt_uri: String,
    clk_tck: f64,
    processes: HashMap<u32, Tracked>,
    cycles: u64,
    last: Option<(Instant, i64)>,
    /// Where "now" comes from: the wall clock, or a test's clock.
    clock: SampleClock,
    /// Whether `/proc` hides other users' processes, and why libvirt could not be reached:
    /// looked at on the first cycle and on every full rescan.
    proc_hidden: bool,
    libvirt_error: Option<String>,
    /// Where the cgroup hierarchies that count CPU are mounted, if anywhere.
    cgroup_mounts: CgroupMounts,
}

enum Tracked {
    /// Not a VM. Its name is read again for a few cycles, then it costs nothing until the next
    /// full rescan.
    Other {
        comm: String,
        rechecks_left: u8,
    },
    Vm(Box<VmState>),
}

struct VmState {
    /// Process start time, in clock ticks after boot: with the pid, the process's identity.
    start_ticks: u64,
    family: &'static Family,
    identity: VmIdentity,
    /// `/proc/<pid>/stat`, open for as long as this process lives.
    stat: OpenFile,
    /// Thread count when the threads were last listed; a change means listing them again.
    listed_threads: Option<u64>,
    threads: HashMap<u32, Thread>,
    /// Counters at the previous cycle.
    previous: Option<Counters>,
    /// The guest probe's channel, when the VM has one.
    channel: Option<Channel>,
    /// The VM's own guest agent, when it may have one.
    guest_agent: Option<GuestAgent>,
    /// Facts received and not yet reported.
    unreported_facts: Option<DeliveredFacts>,
    /// Where its CPU time is read.
    cpu: CpuCounter,
    /// Whether the process holds a KVM VM; looked at again on full rescans until it does (QEMU
    /// creates its VM just after it starts). `None`: its descriptors could not be read.
    uses_kvm: Option<bool>,
    /// Its probe or guest agent sockets this agent may not connect to; looked at on full rescans.
    channels_denied: Vec<String>,
    /// What QEMU's vCPU thread names say ran them (`CPU 0/KVM`: true, `CPU 0/TCG`: false), for
    /// when the process's descriptors cannot be read.
    kvm_by_thread_names: Option<bool>,
}

/// A VM process's CPU counter, chosen when it is first seen.
enum CpuCounter {
    Cgroup(CgroupCpu),
    /// Its threads' run times: the last reading of each, and the running total so far (none
    /// before the first reading).
    Schedstat {
        last_run_ns: HashMap<u32, u64>,
        total_ns: Option<u64>,
    },
    StatTicks,
}

impl CpuCounter {
    fn source(&self) -> CpuSource {
        match self {
            CpuCounter::Cgroup(_) => CpuSource::Cgroup,
            CpuCounter::Schedstat { .. } => CpuSource::Schedstat,
            CpuCounter::StatTicks => CpuSource::StatTicks,
        }
    }
}

struct Thread {
    is_vcpu: bool,
    /// Its `schedstat`, open for its run time when the VM's CPU is counted from its threads.
    run: Option<OpenFile>,
    /// Where its context switches are read, opened when it is first counted.
    switches: Option<(OpenFile, SwitchesFile)>,
}

struct Counters {
    /// CPU time the process used so far, in nanoseconds, from its `CpuCounter`.
    cpu_ns: u64,
    /// Context switches so far of each counted thread.
    switches: HashMap<u32, u64>,
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
            cgroup_mounts,
            channel_dir: None,
            libvirt_uri: DEFAULT_LIBVIRT_URI.to_string(),
            clk_tck: clk_tck.max(1) as f64,
            processes: HashMap::new(),
            cycles: 0,
            last: None,
            clock: SampleClock::system(),
            proc_hidden: false,
            libvirt_error: None,
        }
    }

    /// Looks for probe channels of VMs that do not name one as `<dir>/<uuid>.sock` or
    /// `<dir>/<name>.sock` (VirtualBox and VMware serial ports set to a host pipe, say).
    pub fn with_channel_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.channel_dir = Some(dir.into());
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
        self.libvirt_uri = uri.into();
        self
    }

    fn conventional_channel(&self, identity: &VmIdentity) -> Option<String> {
        let dir = self.channel_dir.as_ref()?;
        let by_name = identity.name.replace('/', "_");
        identity
            .uuid
            .iter()
            .chain(std::iter::once(&by_name))
            .map(|stem| dir.join(format!("{stem}.sock")))
            .find(|path| path.exists())
            .map(|path| path.to_string_lossy().into_owned())
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
            let known = match self.processes.get_mut(&pid) {
                Some(Tracked::Other {
                    comm,
                    rechecks_left,
                }) => {
                    if *rechecks_left == 0 {
                        continue;
                    }
                    *rechecks_left -= 1;
                    match self.proc.stat(pid) {
                        Some(stat) if stat.comm != *comm => None, // exec'd: identify again
                        _ => continue,
                    }
                }
                Some(Tracked::Vm(vm)) => {
                    if full_rescan {
                        vm.threads.clear();
                        if vm.uses_kvm != Some(true) {
                            vm.uses_kvm = self.proc.holds_kvm_vm(pid);
                        }
                        vm.channels_denied = denied_sockets(&vm.identity);
                    }
                    self.proc
                        .read_stat(&vm.stat)
                        .filter(|stat| stat.start_ticks == vm.start_ticks)
                }
                None => None,
            };
            // A new process, or a VM whose process has gone (its open stat no longer reads once
            // the process exits, and a reused pid has another start time): identify whatever
            // has this pid now.
            let stat = match known {
                Some(stat) => stat,
                None => {
                    let Some(file) = self.proc.open_stat(pid) else {
                        continue; // exited since the listing
                    };
                    let Some(stat) = self.proc.read_stat(&file) else {
                        continue;
                    };
                    let tracked = self.identify(pid, &stat.comm, stat.start_ticks, file);
                    self.processes.insert(pid, tracked);
                    stat
                }
            };
            let Some(Tracked::Vm(vm)) = self.processes.get_mut(&pid) else {
                continue;
            };
            let counted = count_threads(&mut self.proc, pid, vm, stat.num_threads);
            let Some(cpu_ns) = read_cpu_ns(
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
            let counters = Counters {
                cpu_ns,
                switches: counted.switches,
            };
            if let Some(facts) = vm.channel.as_mut().and_then(Channel::poll) {
                vm.unreported_facts = Some(DeliveredFacts {
                    source: FactsSource::ProbeChannel,
                    received_ms: now_ms,
                    facts,
                });
            }
            if let Some(previous) = &vm.previous {
                guests.push(GuestSample {
                    hypervisor: vm.identity.hypervisor,
                    management: vm.identity.management.clone(),
                    name: vm.identity.name.clone(),
                    uuid: vm.identity.uuid.clone(),
                    pid,
                    vcpus: counted.vcpus,
                    host_cpu_seconds: counters.cpu_ns.saturating_sub(previous.cpu_ns) as f64 / 1e9,
                    cpu_source: Some(vm.cpu.source()),
                    vcpu_wakeups: wakeups_between(previous, &counters),
                    wakeups_source: counted.source,
                    boot_args: vm.identity.boot_args.clone(),
                    // Either source saying KVM is right: the descriptor scan can run before
                    // QEMU created its VM, and names say nothing without debug-threads.
                    uses_kvm: if vm.uses_kvm == Some(true) || vm.kvm_by_thread_names == Some(true) {
                        Some(true)
                    } else {
                        vm.uses_kvm.or(vm.kvm_by_thread_names)
                    },
                    facts: vm.unreported_facts.take(),
                    totals: Some(ProcessTotals {
                        start_ticks: vm.start_ticks,
                        host_cpu_seconds: counters.cpu_ns as f64 / 1e9,
                        vcpu_wakeups: counters.switches.values().sum(),
                    }),
                });
            }
            vm.previous = Some(counters);
        }

        // Guest agents can take up to a second to answer: asked only now, after every VM's
        // counters were read, so the wait does not stretch anyone's interval, and for at most
        // GUEST_AGENT_BUDGET per cycle (the others wait for the next cycle). Their answers go out
        // with the next report, unless the probe's facts, which say more, arrive first.
        let cycle = self.cycles;
        let asking_since = Instant::now();
        for tracked in self.processes.values_mut() {
            if asking_since.elapsed() >= GUEST_AGENT_BUDGET {
                break;
            }
            if let Tracked::Vm(vm) = tracked
                && let Some((facts, source)) = vm.guest_agent.as_mut().and_then(|a| a.ask(cycle))
            {
                vm.unreported_facts = Some(DeliveredFacts {
                    source,
                    received_ms: self.clock.now().1,
                    facts,
                });
            }
        }

        let blind_spots = self.blind_spots(full_rescan);
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

    /// What this cycle could not see. `/proc`'s mount and libvirt are looked at again only on
    /// the first cycle and on full rescans (every few minutes).
    fn blind_spots(&mut self, full_rescan: bool) -> Vec<BlindSpot> {
        let vms: Vec<&VmState> = self
            .processes
            .values()
            .filter_map(|t| match t {
                Tracked::Vm(vm) => Some(vm.as_ref()),
                Tracked::Other { .. } => None,
            })
            .collect();
        let libvirt_domains = vms
            .iter()
            .filter(|vm| vm.identity.management.as_deref() == Some("libvirt"))
            .count();
        if self.cycles == 1 || full_rescan {
            self.proc_hidden = blind_spots::proc_hidden(self.proc.root());
            self.libvirt_error = (libvirt_domains > 0)
                .then(|| blind_spots::libvirt_unreachable(&self.libvirt_uri))
                .flatten();
        }
        let unreadable: Vec<&&VmState> = vms.iter().filter(|vm| vm.uses_kvm.is_none()).collect();
        let denied: Vec<&String> = vms.iter().flat_map(|vm| &vm.channels_denied).collect();
        blind_spots::blind_spots(&Seen {
            proc_hidden: self.proc_hidden,
            vm_fds_unreadable: unreadable.len(),
            vm_fds_example: unreadable.first().map(|vm| vm.identity.name.clone()),
            channels_denied: denied.len(),
            channel_example: denied.first().map(|p| p.to_string()),
            libvirt_domains,
            libvirt_error: self.libvirt_error.clone(),
            libvirt_uri: self.libvirt_uri.clone(),
        })
    }

    fn identify(&mut self, pid: u32, comm: &str, start_ticks: u64, stat: OpenFile) -> Tracked {
        let argv = self.proc.cmdline(pid);
        let view = ProcessView {
            pid,
            comm,
            argv: &argv,
        };
        match discover::recognise(&view) {
            Some((family, mut identity)) => {
                if let Some(text) = identity
                    .config_file
                    .clone()
                    .and_then(|config| self.proc.read_config_file(pid, &config))
                {
                    discover::vmware::apply_vmx(&mut identity, &text);
                }
                // Names and command lines are set by whoever started the VM: make them safe to
                // send once, here, rather than on every report. A blank name or an absurd vCPU
                // count would get the whole host's reports refused.
                identity.name = clean_text(&identity.name, MAX_NAME_CHARS);
                if identity.name.trim().is_empty() {
                    identity.name = format!("{}-{pid}", identity.hypervisor.as_str());
                }
                identity.vcpus_hint = identity.vcpus_hint.map(|n| n.clamp(1, MAX_VCPUS));
                // libvirt passes listening sockets as descriptors: find their paths.
                let resolve = |socket: Option<String>| {
                    let socket = socket?;
                    match socket.strip_prefix("fd:") {
                        Some(fd) => self.proc.socket_path_of_fd(pid, fd.parse().ok()?),
                        None => Some(socket),
                    }
                };
                identity.probe_channel = resolve(identity.probe_channel.take())
                    .or_else(|| self.conventional_channel(&identity));
                identity.guest_agent_socket = resolve(identity.guest_agent_socket.take());
                identity.boot_args = identity
                    .boot_args
                    .map(|args| clean_text(&args, MAX_BOOT_ARGS_CHARS));
                identity.management = identity.management.map(|m| clean_text(&m, MAX_LABEL_CHARS));
                let cpu = match self
                    .proc
                    .cgroups(pid)
                    .and_then(|text| self.cgroup_mounts.vm_counter(pid, &text))
                {
                    Some(counter) => CpuCounter::Cgroup(counter),
                    None if self
                        .proc
                        .open_thread_schedstat(pid, pid)
                        .and_then(|f| self.proc.read_run_ns(&f))
                        .is_some_and(|ns| ns > 0) =>
                    {
                        CpuCounter::Schedstat {
                            last_run_ns: HashMap::new(),
                            total_ns: None,
                        }
                    }
                    None => CpuCounter::StatTicks,
                };
                Tracked::Vm(Box::new(VmState {
                    start_ticks,
                    cpu,
                    family,
                    stat,
                    listed_threads: None,
                    threads: HashMap::new(),
                    previous: None,
                    channel: identity.probe_channel.clone().map(Channel::new),
                    // Asked in this very cycle: its answer goes out with the VM's first
                    // sample (what `once` prints), and a slow agent is asked again soon.
                    guest_agent: Via::for_vm(&identity, &self.libvirt_uri)
                        .map(|via| GuestAgent::new(via, self.cycles)),
                    unreported_facts: None,
                    uses_kvm: self.proc.holds_kvm_vm(pid),
                    kvm_by_thread_names: None,
                    channels_denied: denied_sockets(&identity),
                    identity,
                }))
            }
            None => Tracked::Other {
                comm: comm.to_string(),
                rechecks_left: NEW_PROCESS_RECHECKS,
            },
        }
    }
}

struct Counted {
    vcpus: u32,
    source: WakeupsSource,
    switches: HashMap<u32, u64>,
    /// Run times read with the switches (from the same `schedstat`), so that the CPU count does
    /// not read those threads' files a second time.
    run_ns: HashMap<u32, u64>,
}

/// Reads the context switches of the VM's vCPU threads, or of all its threads when none has a
/// recognisable vCPU name. The threads are listed (and new ones named) only when their number
/// changed or a counter stopped reading.
fn count_threads(proc: &mut ProcFs, pid: u32, vm: &mut VmState, num_threads: u64) -> Counted {
    if vm.threads.is_empty() || vm.listed_threads != Some(num_threads) {
        let tids = proc.tids(pid).unwrap_or_default();
        vm.threads.retain(|tid, _| tids.contains(tid));
        for &tid in &tids {
            if !vm.threads.contains_key(&tid) {
                let name = proc.thread_name(pid, tid);
                let is_vcpu = name
                    .as_deref()
                    .is_some_and(|name| (vm.family.vcpu_index)(name).is_some());
                if is_vcpu && let Some(name) = &name {
                    vm.kvm_by_thread_names = kvm_by_thread_name(name).or(vm.kvm_by_thread_names);
                }
                vm.threads.insert(
                    tid,
                    Thread {
                        is_vcpu,
                        run: None,
                        switches: None,
                    },
                );
            }
        }
        vm.listed_threads = Some(num_threads);
    }
    let vcpu_threads = (vm.threads.values().filter(|t| t.is_vcpu).count() as u32).min(MAX_VCPUS);
    let (source, vcpus) = if vcpu_threads > 0 {
        (WakeupsSource::VcpuThreads, vcpu_threads)
    } else {
        (
            WakeupsSource::WholeProcess,
            vm.identity.vcpus_hint.unwrap_or(1).max(1),
        )
    };
    let mut switches = HashMap::new();
    let mut run_ns = HashMap::new();
    let mut gone = Vec::new();
    for (&tid, thread) in vm.threads.iter_mut() {
        if !(thread.is_vcpu || vcpu_threads == 0) {
            continue;
        }
        if thread.switches.is_none() {
            thread.switches = proc.open_thread_switches(pid, tid);
        }
        match &thread.switches {
            Some((file, kind)) => match proc.read_thread_counters(file, *kind) {
                Some(counters) => {
                    switches.insert(tid, counters.switches);
                    if let Some(ns) = counters.run_ns {
                        run_ns.insert(tid, ns);
                    }
                }
                None => gone.push(tid),
            },
            None => gone.push(tid),
        }
    }
    if !gone.is_empty() {
        for tid in gone {
            vm.threads.remove(&tid);
        }
        vm.listed_threads = None; // list again next cycle
    }
    Counted {
        vcpus,
        source,
        switches,
        run_ns,
    }
}

/// The VM's probe and guest agent sockets that exist but refuse this agent: connecting to a
/// UNIX socket needs write permission on it.
fn denied_sockets(identity: &VmIdentity) -> Vec<String> {
    // libvirt's domains' guest agents are asked through libvirt, never on their socket.
    let through_libvirt = matches!(
        Via::for_vm(identity, DEFAULT_LIBVIRT_URI),
        Some(Via::Libvirt { .. })
    );
    let guest_agent = (!through_libvirt).then_some(&identity.guest_agent_socket);
    std::iter::once(&identity.probe_channel)
        .chain(guest_agent)
        .flatten()
        .filter(|path| {
            let Ok(c_path) = std::ffi::CString::new(path.as_bytes()) else {
                return false;
            };
            // SAFETY: faccessat only reads the NUL-terminated path we own.
            let denied = unsafe {
                libc::faccessat(
                    libc::AT_FDCWD,
                    c_path.as_ptr(),
                    libc::W_OK,
                    libc::AT_EACCESS,
                )
            } != 0;
            denied && std::io::Error::last_os_error().kind() == std::io::ErrorKind::PermissionDenied
        })
        .cloned()
        .collect()
}

/// The accelerator a QEMU vCPU thread's name gives (`CPU 0/KVM`, `CPU 1/TCG`): whether it is KVM.
fn kvm_by_thread_name(name: &str) -> Option<bool> {
    match name.rsplit_once('/')?.1 {
        "KVM" => Some(true),
        "TCG" => Some(false),
        _ => None,
    }
}

/// The VM process's CPU time so far in nanoseconds, from its counter. Counted from threads, a
/// thread seen for the first time adds all its run time (it started since the last cycle, or
/// this is the first), and one that ended loses its run since it was last read. `read_now`
/// holds the run times this cycle already read (with the vCPU threads' switches); only the
/// other threads' `schedstat` is read here. `stat` is the process's stat ticks and `CLK_TCK`.
fn read_cpu_ns(
    proc: &mut ProcFs,
    pid: u32,
    vm: &mut VmState,
    (stat_ticks, clk_tck): (u64, f64),
    read_now: &HashMap<u32, u64>,
) -> Option<u64> {
    match &mut vm.cpu {
        CpuCounter::Cgroup(counter) => counter.read_ns(&mut Vec::new()),
        CpuCounter::StatTicks => Some((stat_ticks as f64 * 1e9 / clk_tck) as u64),
        CpuCounter::Schedstat {
            last_run_ns,
            total_ns,
        } => {
            let mut gone = Vec::new();
            // The first reading starts the total at what the process has used so far by its
            // stat ticks (dead threads included), so that the total means the same after the
            // agent restarts; from then on the threads' run times add to it exactly.
            let first = total_ns.is_none();
            let mut total = total_ns.unwrap_or((stat_ticks as f64 * 1e9 / clk_tck) as u64);
            for (&tid, thread) in vm.threads.iter_mut() {
                let run_ns = match read_now.get(&tid) {
                    Some(&ns) => Some(ns),
                    None => {
                        if thread.run.is_none() {
                            thread.run = proc.open_thread_schedstat(pid, tid);
                        }
                        thread.run.as_ref().and_then(|f| proc.read_run_ns(f))
                    }
                };
                let Some(run_ns) = run_ns else {
                    gone.push(tid);
                    continue;
                };
                // A thread seen before counts from its last reading (kept even while it could
                // not be read, so that it is never counted twice), a new one in full.
                let before = last_run_ns.insert(tid, run_ns).unwrap_or(0);
                if !first {
                    total = total.saturating_add(run_ns.saturating_sub(before));
                }
            }
            *total_ns = Some(total);
            // Readings of threads long gone are dropped once they outnumber the live ones.
            if last_run_ns.len() > 2 * vm.threads.len() + 64 {
                last_run_ns.retain(|tid, _| proc.thread_exists(pid, *tid));
            }
            if !gone.is_empty() {
                // A thread ended: another may have started in its place with the count
                // unchanged, so the threads are listed again next cycle.
                for tid in gone {
                    vm.threads.remove(&tid);
                }
                vm.listed_threads = None;
            }
            Some(total)
        }
    }
}

/// Wake-ups of the threads counted at both ends of the interval. A thread that started or ended
/// inside the interval is left out rather than guessed at.
fn wakeups_between(previous: &Counters, now: &Counters) -> u64 {
    now.switches
        .iter()
        .filter_map(|(tid, &count)| Some(count.saturating_sub(*previous.switches.get(tid)?)))
        .sum()
}
