//! Discovery and sampling on `/proc` trees: one recorded from a real QEMU guest, and one built per
//! hypervisor family from the process and thread names each family uses.

use std::fs;
use std::path::Path;

use tickscope_agent::sampler::Sampler;
use tickscope_agent::wire::{GuestSample, Hypervisor, WakeupsSource};

const CLK_TCK: u64 = 100;

fn copy_tree(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn recorded_qemu_tcg_guest_is_measured_from_its_vcpu_threads() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qemu-tcg-nohz-off");
    let proc = tempfile::tempdir().unwrap();
    copy_tree(&fixture.join("t0"), proc.path());
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    assert!(
        sampler.cycle().unwrap().is_none(),
        "first cycle only sets the start"
    );
    copy_tree(&fixture.join("t1"), proc.path());
    let measured = sampler.cycle().unwrap().unwrap();

    assert_eq!(measured.guests.len(), 1);
    let g = &measured.guests[0];
    assert_eq!(g.hypervisor, Hypervisor::Qemu);
    assert_eq!(g.name, "t2");
    assert_eq!(g.pid, 8156);
    assert_eq!(g.vcpus, 2);
    assert_eq!(g.wakeups_source, WakeupsSource::VcpuThreads);
    // utime+stime went from 913 to 964 ticks; the two `CPU n/TCG` threads switched 1369 and 1382
    // times. The main loop thread's 1721 switches are not vCPU wake-ups and must not count.
    assert!(
        (g.host_cpu_seconds - 0.51).abs() < 1e-9,
        "{}",
        g.host_cpu_seconds
    );
    assert_eq!(g.vcpu_wakeups, 1369 + 1382);
    assert_eq!(g.boot_args.as_deref(), Some("console=ttyS0 quiet nohz=off"));
    assert_eq!(g.uses_kvm, Some(false), "`CPU n/TCG` threads");
    // The running totals are the counters at t1 themselves, with the process's start time.
    let totals = g.totals.as_ref().expect("totals are sent");
    assert!((totals.host_cpu_seconds - 9.64).abs() < 1e-9, "{totals:?}");
    assert!(totals.vcpu_wakeups >= g.vcpu_wakeups, "{totals:?}");
}

/// A process in a fake `/proc`. Its files are rewritten in place on every write, as the kernel
/// does, because the sampler keeps them open.: its stat line, argv, and threads with names and switch counts.
struct FakeProcess<'a> {
    pid: u32,
    comm: &'a str,
    argv: &'a [&'a str],
    cpu_ticks: u64,
    start_ticks: u64,
    threads: &'a [(u32, &'a str, u64)],
    /// Whether threads have `schedstat` files (else only `status`).
    schedstat: bool,
}

fn write_process(root: &Path, p: &FakeProcess) {
    let dir = root.join(p.pid.to_string());
    fs::create_dir_all(&dir).unwrap();
    // Fields 14 and 15 are utime and stime, 22 the start time.
    let utime = p.cpu_ticks / 2;
    let stime = p.cpu_ticks - utime;
    fs::write(
        dir.join("stat"),
        format!(
            "{} ({}) S 1 {} 1 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 {} 0 {} 100000 100",
            p.pid,
            p.comm,
            p.pid,
            p.threads.len(),
            p.start_ticks
        ),
    )
    .unwrap();
    let mut cmdline = p.argv.join("\0");
    cmdline.push('\0');
    fs::write(dir.join("cmdline"), cmdline).unwrap();
    // Files are rewritten in place, as the kernel does: the sampler keeps them open.
    for (tid, name, switches) in p.threads {
        let t = dir.join(format!("task/{tid}"));
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("comm"), format!("{name}\n")).unwrap();
        let voluntary = switches * 9 / 10;
        fs::write(
            t.join("status"),
            format!(
                "Name:\t{name}\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t{voluntary}\n\
                 nonvoluntary_ctxt_switches:\t{}\n",
                switches - voluntary
            ),
        )
        .unwrap();
        // Kernels with CONFIG_SCHED_INFO also have schedstat, which the sampler prefers.
        if p.schedstat {
            fs::write(
                t.join("schedstat"),
                format!("123456789 2345678 {switches}\n"),
            )
            .unwrap();
        }
    }
}

/// Sets a thread's `schedstat`: its run time in ns and its switches (as `write_process` writes
/// it with a fixed run time).
fn set_run_ns(root: &Path, pid: u32, tid: u32, run_ns: u64, switches: u64) {
    fs::write(
        root.join(format!("{pid}/task/{tid}/schedstat")),
        format!("{run_ns} 0 {switches}\n"),
    )
    .unwrap();
}

/// Writes the process, samples, advances its counters, and returns what the sampler measured.
fn measure_one(
    p: FakeProcess,
    cpu_ticks_later: u64,
    switches_added: &[u64],
) -> Option<GuestSample> {
    let proc = tempfile::tempdir().unwrap();
    // Processes that are not VMs must be passed over.
    for (pid, comm, argv) in [
        (1, "systemd", "/sbin/init"),
        (300, "qemu-img", "qemu-img info disk.qcow2"),
        (301, "bash", "-bash"),
    ] {
        let argv: Vec<&str> = argv.split(' ').collect();
        write_process(
            proc.path(),
            &FakeProcess {
                pid,
                comm,
                argv: &argv,
                cpu_ticks: 5,
                start_ticks: 1,
                threads: &[(pid, comm, 10)],
                schedstat: false,
            },
        );
    }
    write_process(proc.path(), &p);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    assert!(sampler.cycle().unwrap().is_none());
    let later: Vec<(u32, &str, u64)> = p
        .threads
        .iter()
        .zip(switches_added)
        .map(|(&(tid, name, n), added)| (tid, name, n + added))
        .collect();
    write_process(
        proc.path(),
        &FakeProcess {
            cpu_ticks: cpu_ticks_later,
            threads: &later,
            ..p
        },
    );
    let mut guests = sampler.cycle().unwrap().unwrap().guests;
    assert!(
        guests.len() <= 1,
        "non-VM processes were reported: {guests:?}"
    );
    guests.pop()
}

#[test]
fn each_hypervisor_family_is_found_with_its_vcpu_threads() {
    struct Case<'a> {
        family: Hypervisor,
        comm: &'a str,
        argv: &'a [&'a str],
        threads: &'a [(u32, &'a str, u64)],
        added: &'a [u64],
        name: &'a str,
        vcpus: u32,
        wakeups: u64,
    }
    let cases = [
        Case {
            family: Hypervisor::Qemu,
            comm: "qemu-system-x86",
            argv: &[
                "/usr/bin/qemu-system-x86_64",
                "-name",
                "guest=web,debug-threads=on",
                "-smp",
                "2",
            ],
            threads: &[
                (10, "qemu-system-x86", 50),
                (11, "CPU 0/KVM", 100),
                (12, "CPU 1/KVM", 100),
                (13, "IO mon_iothread", 5),
            ],
            added: &[999, 1000, 2000, 999],
            name: "web",
            vcpus: 2,
            wakeups: 3000,
        },
        Case {
            family: Hypervisor::Virtualbox,
            comm: "VBoxHeadless",
            argv: &[
                "/usr/lib/virtualbox/VBoxHeadless",
                "--comment",
                "slitaz",
                "--startvm",
                "3f1e2d4c-5b6a-4798-8a9b-0c1d2e3f4a5b",
            ],
            threads: &[
                (20, "VBoxHeadless", 1),
                (21, "EMT-0", 10),
                (22, "EMT-1", 10),
                (23, "TimerLR", 10),
            ],
            added: &[500, 100, 200, 5000],
            name: "slitaz",
            vcpus: 2,
            wakeups: 300,
        },
        Case {
            family: Hypervisor::Vmware,
            comm: "vmware-vmx",
            argv: &[
                "/usr/lib/vmware/bin/vmware-vmx",
                "-s",
                "vmx.stdio.keep=TRUE",
                "/vm/fc6/fc6.vmx",
            ],
            threads: &[
                (30, "vmware-vmx", 1),
                (31, "vmx-vcpu-0", 1),
                (32, "vmx-mks", 1),
            ],
            added: &[50, 1000, 70],
            name: "fc6",
            vcpus: 1,
            wakeups: 1000,
        },
        Case {
            family: Hypervisor::Firecracker,
            comm: "firecracker",
            argv: &[
                "/usr/bin/firecracker",
                "--id",
                "fn-1",
                "--api-sock",
                "/run/fc.sock",
            ],
            threads: &[
                (40, "firecracker", 1),
                (41, "fc_api", 1),
                (42, "fc_vcpu 0", 3),
            ],
            added: &[1, 1, 40],
            name: "fn-1",
            vcpus: 1,
            wakeups: 40,
        },
        Case {
            family: Hypervisor::CloudHypervisor,
            comm: "cloud-hyperviso",
            argv: &[
                "/usr/bin/cloud-hypervisor",
                "--api-socket",
                "path=/run/ch/edge.sock",
                "--cpus",
                "boot=4",
            ],
            threads: &[
                (50, "cloud-hyperviso", 1),
                (51, "vmm", 1),
                (52, "vcpu0", 1),
                (53, "vcpu1", 1),
                (54, "vcpu2", 1),
                (55, "vcpu3", 1),
            ],
            added: &[9, 9, 10, 20, 30, 40],
            name: "edge",
            vcpus: 4,
            wakeups: 100,
        },
    ];
    for case in cases {
        let g = measure_one(
            FakeProcess {
                pid: 1000,
                comm: case.comm,
                argv: case.argv,
                cpu_ticks: 200,
                start_ticks: 5000,
                threads: case.threads,
                schedstat: true,
            },
            450,
            case.added,
        )
        .unwrap_or_else(|| panic!("{:?} not found", case.family));
        assert_eq!(g.hypervisor, case.family);
        assert_eq!(g.name, case.name, "{:?}", case.family);
        assert_eq!(g.vcpus, case.vcpus, "{:?}", case.family);
        assert_eq!(
            g.wakeups_source,
            WakeupsSource::VcpuThreads,
            "{:?}",
            case.family
        );
        assert_eq!(g.vcpu_wakeups, case.wakeups, "{:?}", case.family);
        assert!((g.host_cpu_seconds - 2.5).abs() < 1e-9, "{:?}", case.family);
    }
}

#[test]
fn vm_without_vcpu_thread_names_falls_back_to_the_whole_process() {
    // QEMU without debug-threads=on: every thread carries the process name.
    let g = measure_one(
        FakeProcess {
            pid: 2000,
            comm: "qemu-system-x86",
            argv: &["qemu-system-x86_64", "-smp", "cpus=3", "-name", "legacy"],
            cpu_ticks: 100,
            start_ticks: 7,
            threads: &[
                (2000, "qemu-system-x86", 10),
                (2001, "qemu-system-x86", 10),
                (2002, "qemu-system-x86", 10),
            ],
            schedstat: false,
        },
        110,
        &[100, 200, 300],
    )
    .unwrap();
    assert_eq!(g.wakeups_source, WakeupsSource::WholeProcess);
    assert_eq!(g.vcpus, 3, "vCPUs come from -smp when threads do not say");
    assert_eq!(g.vcpu_wakeups, 600);
    assert!((g.host_cpu_seconds - 0.1).abs() < 1e-9);
}

#[test]
fn a_reused_pid_starts_a_new_measurement_instead_of_a_bogus_delta() {
    let proc = tempfile::tempdir().unwrap();
    let write = |start_ticks, cpu_ticks, switches| {
        write_process(
            proc.path(),
            &FakeProcess {
                pid: 3000,
                comm: "firecracker",
                argv: &["firecracker", "--id", "a"],
                cpu_ticks,
                start_ticks,
                threads: &[(3001, "fc_vcpu 0", switches)],
                schedstat: true,
            },
        )
    };
    write(100, 5000, 90_000);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    // The VM restarted with the same pid: another start time, counters from nearly zero.
    write(900, 10, 20);
    let measured = sampler.cycle().unwrap().unwrap();
    assert!(measured.guests.is_empty(), "{:?}", measured.guests);
    write(900, 30, 70);
    let g = sampler.cycle().unwrap().unwrap().guests.pop().unwrap();
    assert_eq!(g.vcpu_wakeups, 50);
    assert!((g.host_cpu_seconds - 0.2).abs() < 1e-9);
    // The totals name the new process, so the server starts its count again too.
    let totals = g.totals.unwrap();
    assert_eq!(totals.start_ticks, 900);
    assert_eq!(totals.vcpu_wakeups, 70);
    assert!((totals.host_cpu_seconds - 0.3).abs() < 1e-9);
}

#[test]
fn a_vm_that_exits_is_no_longer_reported() {
    let proc = tempfile::tempdir().unwrap();
    let vm = FakeProcess {
        pid: 4000,
        comm: "firecracker",
        argv: &["firecracker", "--id", "gone"],
        cpu_ticks: 1,
        start_ticks: 1,
        threads: &[(4001, "fc_vcpu 0", 1)],
        schedstat: true,
    };
    write_process(proc.path(), &vm);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    assert_eq!(sampler.cycle().unwrap().unwrap().guests.len(), 1);
    fs::remove_dir_all(proc.path().join("4000")).unwrap();
    assert!(sampler.cycle().unwrap().unwrap().guests.is_empty());
}

#[test]
fn hostile_vm_names_are_cleaned_before_they_are_sent() {
    let name = format!("guest=evil\u{1b}[2J{},debug-threads=on", "x".repeat(400));
    let g = measure_one(
        FakeProcess {
            pid: 5000,
            comm: "qemu-system-x86",
            argv: &[
                "qemu-system-x86_64",
                "-name",
                &name,
                "-append",
                "quiet\nnohz=off",
            ],
            cpu_ticks: 1,
            start_ticks: 1,
            threads: &[(5001, "CPU 0/KVM", 1)],
            schedstat: true,
        },
        2,
        &[10],
    )
    .unwrap();
    assert!(g.name.starts_with("evil\u{FFFD}[2Jxxx"), "{:?}", g.name);
    assert_eq!(
        g.name.chars().count(),
        tickscope_agent::wire::MAX_NAME_CHARS
    );
    assert_eq!(g.boot_args.as_deref(), Some("quiet\u{FFFD}nohz=off"));
}

#[test]
fn blank_names_and_absurd_vcpu_counts_cannot_get_reports_refused() {
    let g = measure_one(
        FakeProcess {
            pid: 6000,
            comm: "qemu-system-x86",
            argv: &["qemu-system-x86_64", "-name", "", "-smp", "100000"],
            cpu_ticks: 1,
            start_ticks: 1,
            threads: &[(6000, "qemu-system-x86", 1)],
            schedstat: true,
        },
        2,
        &[10],
    )
    .unwrap();
    assert_eq!(g.name, "qemu-6000");
    assert_eq!(g.vcpus, tickscope_agent::wire::MAX_VCPUS);
}

#[test]
fn a_launcher_that_execs_qemu_is_recognised_at_the_next_cycle() {
    let proc = tempfile::tempdir().unwrap();
    let write = |comm: &str, argv: &[&str], switches: u64| {
        write_process(
            proc.path(),
            &FakeProcess {
                pid: 7000,
                comm,
                argv,
                cpu_ticks: 10,
                start_ticks: 50,
                threads: &[(7001, "CPU 0/KVM", switches)],
                schedstat: true,
            },
        )
    };
    // libvirt forks, prepares the child, then execs QEMU in it: same pid, same start time.
    write(
        "rpc-virtqemud",
        &["/usr/sbin/virtqemud", "--timeout", "120"],
        1,
    );
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    write(
        "qemu-system-x86",
        &[
            "/usr/bin/qemu-system-x86_64",
            "-name",
            "guest=late,debug-threads=on",
        ],
        5,
    );
    assert!(
        sampler.cycle().unwrap().unwrap().guests.is_empty(),
        "found, counters start now"
    );
    write(
        "qemu-system-x86",
        &[
            "/usr/bin/qemu-system-x86_64",
            "-name",
            "guest=late,debug-threads=on",
        ],
        25,
    );
    let g = sampler
        .cycle()
        .unwrap()
        .unwrap()
        .guests
        .pop()
        .expect("the exec'd VM was missed");
    assert_eq!((g.name.as_str(), g.vcpu_wakeups), ("late", 20));
}

#[test]
fn vmware_names_come_from_the_vmx_file_seen_through_the_vm_process_root() {
    let proc = tempfile::tempdir().unwrap();
    let vm_dir = proc.path().join("8000/root/vms/fc6");
    fs::create_dir_all(&vm_dir).unwrap();
    fs::write(vm_dir.join("fc6.vmx"), "displayName = \"Fedora Core 6 (HZ=1000)\"\nnumvcpus = \"1\"\nuuid.bios = \"56 4d 9a 3b 12 34 56 78-9a bc de f0 12 34 56 78\"\n").unwrap();
    // A second VM whose .vmx is a FIFO: reading it must neither block nor fail the cycle.
    let fifo_dir = proc.path().join("8100/root/vms");
    fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = fifo_dir.join("trap.vmx");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (pid, vmx) in [(8000, "/vms/fc6/fc6.vmx"), (8100, "/vms/trap.vmx")] {
        write_process(
            proc.path(),
            &FakeProcess {
                pid,
                comm: "vmware-vmx",
                argv: &["/usr/lib/vmware/bin/vmware-vmx", "-s", "x=1", vmx],
                cpu_ticks: 1,
                start_ticks: 1,
                threads: &[(pid + 1, "vmx-vcpu-0", 1)],
                schedstat: true,
            },
        );
    }
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    let mut guests = sampler.cycle().unwrap().unwrap().guests;
    guests.sort_by_key(|g| g.pid);
    assert_eq!(guests[0].name, "Fedora Core 6 (HZ=1000)");
    assert_eq!(
        guests[0].uuid.as_deref(),
        Some("564d9a3b-1234-5678-9abc-def012345678")
    );
    assert_eq!(guests[1].name, "trap");
}

#[test]
fn a_schedstat_that_counts_nothing_falls_back_to_status() {
    let proc = tempfile::tempdir().unwrap();
    let vm = FakeProcess {
        pid: 9000,
        comm: "firecracker",
        argv: &["firecracker", "--id", "old-kernel-host"],
        cpu_ticks: 1,
        start_ticks: 1,
        threads: &[(9001, "fc_vcpu 0", 100)],
        schedstat: false,
    };
    write_process(proc.path(), &vm);
    let schedstat = proc.path().join("9000/task/9001/schedstat");
    fs::write(&schedstat, "0 0 0\n").unwrap();
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    write_process(
        proc.path(),
        &FakeProcess {
            threads: &[(9001, "fc_vcpu 0", 160)],
            ..vm
        },
    );
    let g = sampler.cycle().unwrap().unwrap().guests.pop().unwrap();
    assert_eq!(g.vcpu_wakeups, 60);
}

/// A minimal qemu-guest-agent on `listener`: answers guest-sync with its id and
/// guest-get-osinfo with a RHEL 8 kernel, for one client.
fn fake_guest_agent(listener: std::os::unix::net::UnixListener) -> std::thread::JoinHandle<()> {
    use std::io::{BufRead, BufReader, Write};
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut lines = BufReader::new(stream).lines();
        for _ in 0..2 {
            let request: serde_json::Value =
                serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            let reply = match request["execute"].as_str().unwrap() {
                "guest-sync" => serde_json::json!({"return": request["arguments"]["id"]}),
                _ => {
                    serde_json::json!({"return": {"kernel-release": "4.18.0-513.el8.x86_64", "id": "rhel", "version-id": "8.9"}})
                }
            };
            writer.write_all(format!("{reply}\n").as_bytes()).unwrap();
        }
    })
}

/// A QEMU VM with a qemu-guest-agent socket at `socket`.
fn write_vm_with_guest_agent(root: &Path, socket: &Path) {
    let chardev = format!(
        "socket,id=qga0,path={},server=on,wait=off",
        socket.display()
    );
    let vm = FakeProcess {
        pid: 9500,
        comm: "qemu-system-x86",
        argv: &[
            "qemu-system-x86_64",
            "-name",
            "guest=rhel8",
            "-chardev",
            &chardev,
            "-device",
            "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        ],
        cpu_ticks: 1,
        start_ticks: 1,
        threads: &[(9501, "CPU 0/KVM", 1)],
        schedstat: true,
    };
    write_process(root, &vm);
}

#[test]
fn facts_from_qemu_guest_agent_ride_along_with_the_first_report() {
    let proc = tempfile::tempdir().unwrap();
    let socket = proc.path().join("qga.sock");
    let agent = fake_guest_agent(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    write_vm_with_guest_agent(proc.path(), &socket);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap(); // identifies the VM and asks its guest agent, after the counters
    agent.join().unwrap();
    let first = sampler.cycle().unwrap().unwrap();
    let delivered = first.guests[0]
        .facts
        .as_ref()
        .expect("the guest agent's facts, in the first report (what `once` prints)");
    assert_eq!(
        delivered.source,
        tickscope_agent::wire::FactsSource::QemuGuestAgent
    );
    assert_eq!(
        delivered.facts.kernel_release.as_deref(),
        Some("4.18.0-513.el8.x86_64")
    );
    assert_eq!(delivered.facts.distro_id.as_deref(), Some("rhel"));
    assert!(
        sampler.cycle().unwrap().unwrap().guests[0].facts.is_none(),
        "sent once"
    );
}

#[test]
fn a_guest_agent_that_comes_up_after_its_vm_is_heard_at_once() {
    let proc = tempfile::tempdir().unwrap();
    let socket = proc.path().join("qga.sock");
    write_vm_with_guest_agent(proc.path(), &socket);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap(); // the guest is still booting: nobody answers
    assert!(sampler.cycle().unwrap().unwrap().guests[0].facts.is_none());
    // qemu-ga starts in the guest; the agent asks again within a few cycles, not 10 minutes.
    let agent = fake_guest_agent(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let heard_at = (1..=8).find(|_| {
        sampler.cycle().unwrap().unwrap().guests[0]
            .facts
            .as_ref()
            .is_some_and(|d| d.facts.kernel_release.is_some())
    });
    // Before joining: had it never been asked, the fake agent would wait for ever.
    assert!(
        heard_at.is_some_and(|cycles| cycles <= 4),
        "heard after {heard_at:?} cycles"
    );
    agent.join().unwrap();
}

#[test]
fn the_accelerator_is_read_from_vcpu_thread_names_when_descriptors_are_hidden() {
    let proc = tempfile::tempdir().unwrap();
    for (pid, thread) in [(9800, "CPU 0/KVM"), (9900, "CPU 0/TCG")] {
        let name = format!("guest=vm{pid}");
        write_process(
            proc.path(),
            &FakeProcess {
                pid,
                comm: "qemu-system-x86",
                argv: &["qemu-system-x86_64", "-name", &name],
                cpu_ticks: 1,
                start_ticks: 1,
                threads: &[(pid + 1, thread, 1)],
                schedstat: true,
            },
        );
    }
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    sampler.cycle().unwrap();
    let measured = sampler.cycle().unwrap().unwrap();
    let uses_kvm = |name: &str| {
        measured
            .guests
            .iter()
            .find(|g| g.name == name)
            .unwrap()
            .uses_kvm
    };
    // The fake /proc has no fd directories, as when they cannot be read.
    assert_eq!(uses_kvm("vm9800"), Some(true));
    assert_eq!(uses_kvm("vm9900"), Some(false));
}

#[test]
fn a_probe_channel_is_found_by_convention_for_vms_that_name_none() {
    use std::io::Write;
    let proc = tempfile::tempdir().unwrap();
    let channels = tempfile::tempdir().unwrap();
    let uuid = "3f1e2d4c-5b6a-4798-8a9b-0c1d2e3f4a5b";
    let listener =
        std::os::unix::net::UnixListener::bind(channels.path().join(format!("{uuid}.sock")))
            .unwrap();
    let vm = FakeProcess {
        pid: 9700,
        comm: "VBoxHeadless",
        argv: &[
            "/usr/lib/virtualbox/VBoxHeadless",
            "--comment",
            "slitaz",
            "--startvm",
            uuid,
        ],
        cpu_ticks: 1,
        start_ticks: 1,
        threads: &[(9701, "EMT", 1)],
        schedstat: true,
    };
    write_process(proc.path(), &vm);
    let mut sampler = Sampler::new(proc.path(), CLK_TCK).with_channel_dir(channels.path());
    sampler.cycle().unwrap();
    let (mut guest_end, _) = listener.accept().unwrap();
    guest_end
        .write_all(b"{\"kernel_release\":\"2.6.29-slitaz\"}\n")
        .unwrap();
    let g = sampler.cycle().unwrap().unwrap().guests.pop().unwrap();
    let delivered = g.facts.expect("facts through the conventional channel");
    assert_eq!(
        delivered.facts.kernel_release.as_deref(),
        Some("2.6.29-slitaz")
    );
}

#[test]
fn a_listening_socket_passed_as_a_descriptor_is_found_by_its_path() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("org.tickscope.probe.0");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    // This process stands in for QEMU holding the socket libvirt handed it.
    let proc = tickscope_agent::procfs::ProcFs::new("/proc");
    let found = proc.socket_path_of_fd(std::process::id(), listener.as_raw_fd() as u32);
    assert_eq!(found.as_deref(), path.to_str());
}

#[test]
fn a_vm_process_holding_a_kvm_vm_runs_on_kvm() {
    let root = tempfile::tempdir().unwrap();
    // Descriptors as /proc shows them: links whose targets need not exist.
    let fds = |pid: u32, targets: &[&str]| {
        let dir = root.path().join(format!("{pid}/fd"));
        fs::create_dir_all(&dir).unwrap();
        for (fd, target) in targets.iter().enumerate() {
            std::os::unix::fs::symlink(target, dir.join(fd.to_string())).unwrap();
        }
    };
    fds(
        100,
        &[
            "/dev/null",
            "/dev/kvm",
            "anon_inode:kvm-vm",
            "anon_inode:kvm-vcpu:0",
            "/dev/vhost-net",
        ],
    );
    // QEMU under TCG: no KVM descriptors at all.
    fds(
        200,
        &["/dev/null", "socket:[12345]", "anon_inode:[eventfd]"],
    );
    let proc = tickscope_agent::procfs::ProcFs::new(root.path());
    assert_eq!(proc.holds_kvm_vm(100), Some(true));
    assert_eq!(proc.holds_kvm_vm(200), Some(false));
    // Its KVM VM's descriptor names its debugfs directory; a vhost device, its vhost workers.
    use tickscope_agent::procfs::VmFds;
    let cases = [
        (
            100,
            Some(VmFds {
                kvm_vm_fd: Some(2),
                vhost: true,
            }),
        ),
        (
            200,
            Some(VmFds {
                kvm_vm_fd: None,
                vhost: false,
            }),
        ),
        (300, None),
    ];
    for (pid, expected) in cases {
        assert_eq!(proc.vm_fds(pid), expected, "{pid}");
    }
    // A process that is gone (or whose descriptors cannot be read) is not known either way.
    assert_eq!(proc.holds_kvm_vm(300), None);
}

/// A KVM QEMU with an I/O thread, its threads' run times and KVM's halt-polling counters moving
/// between two cycles: the sample splits the VM's CPU by thread and carries the polling time.
#[test]
fn a_kvm_vm_is_split_by_thread_and_its_halt_polling_read_from_debugfs() {
    let proc = tempfile::tempdir().unwrap();
    let debugfs = tempfile::tempdir().unwrap();
    let pid = 4100;
    // (tid, name, run ns at the first cycle, run ns at the second)
    let threads: [(u32, &str, u64, u64); 4] = [
        (4100, "qemu-system-x86", 5_000_000_000, 5_030_000_000),
        (4101, "IO io0", 1_000_000_000, 1_200_000_000),
        (4102, "CPU 0/KVM", 9_000_000_000, 9_500_000_000),
        (4103, "CPU 1/KVM", 8_000_000_000, 8_300_000_000),
    ];
    let write = |at: usize| {
        let run = |t: &(u32, &str, u64, u64)| if at == 0 { t.2 } else { t.3 };
        let cpu_ns: u64 = threads.iter().map(run).sum();
        let ticks = cpu_ns / 10_000_000;
        write_process(
            proc.path(),
            &FakeProcess {
                pid,
                comm: "qemu-system-x86",
                argv: &[
                    "/usr/bin/qemu-system-x86_64",
                    "-name",
                    "guest=split,debug-threads=on",
                    "-object",
                    "iothread,id=io0",
                    "-machine",
                    "q35,hpet=off",
                    "-cpu",
                    "host,hv-relaxed,hv-stimer",
                ],
                cpu_ticks: ticks,
                start_ticks: 7,
                threads: &threads.map(|t| (t.0, t.1, 100 + at as u64 * 50)),
                schedstat: true,
            },
        );
        // Run times that move, in each thread's schedstat (run ns, wait ns, switches).
        for t in &threads {
            set_run_ns(proc.path(), pid, t.0, run(t), 100 + at as u64 * 50);
        }
        let kvm = debugfs.path().join(format!("kvm/{pid}-11"));
        fs::create_dir_all(&kvm).unwrap();
        fs::write(
            kvm.join("halt_poll_success_ns"),
            format!("{}\n", 40_000_000 * at as u64),
        )
        .unwrap();
        fs::write(
            kvm.join("halt_poll_fail_ns"),
            format!("{}\n", 10_000_000 * at as u64),
        )
        .unwrap();
    };
    write(0);
    let fd = proc.path().join(format!("{pid}/fd"));
    fs::create_dir_all(&fd).unwrap();
    std::os::unix::fs::symlink("anon_inode:kvm-vm", fd.join("11")).unwrap();
    let mut sampler = Sampler::new(proc.path(), CLK_TCK).with_debugfs(debugfs.path());
    assert!(sampler.cycle().unwrap().is_none());
    write(1);
    let measured = sampler.cycle().unwrap().unwrap();
    let g = &measured.guests[0];
    assert_eq!(g.uses_kvm, Some(true));
    assert!((g.host_cpu_seconds - 1.03).abs() < 1e-9, "{g:?}");
    let parts = g.cpu_parts.as_ref().expect("a split");
    assert!((parts.vcpus_s - 0.8).abs() < 1e-9, "{parts:?}");
    assert!((parts.iothreads_s - 0.2).abs() < 1e-9, "{parts:?}");
    assert_eq!(parts.vhost_s, 0.0);
    assert!((parts.emulator_s - 0.03).abs() < 1e-9, "{parts:?}");
    assert_eq!(g.halt_poll_seconds, Some(0.05));
    let config = g.vm_config.as_ref().expect("the VM's setup");
    assert_eq!(config.hpet, Some(false));
    assert_eq!(
        config.hyperv,
        Some(vec!["relaxed".to_string(), "stimer".to_string()])
    );
    assert!(
        measured.blind_spots.is_empty(),
        "{:?}",
        measured.blind_spots
    );

    // debugfs closed to the agent: no polling time, and a blind spot saying so.
    fs::remove_dir_all(debugfs.path().join("kvm")).unwrap();
    let measured = sampler.cycle().unwrap().unwrap();
    assert_eq!(measured.guests[0].halt_poll_seconds, None);
    let checks: Vec<_> = measured.blind_spots.iter().map(|s| s.check).collect();
    assert_eq!(
        checks,
        [tickscope_agent::wire::BlindSpotCheck::HaltPollCounters]
    );
}

/// A VM with a vhost-net device: on Linux 6.4 and later its vhost worker is a thread of the VM
/// process and counts in its split; before, it is a kernel thread outside it, which the agent
/// cannot count for the VM, and a blind spot says so.
#[test]
fn vhost_workers_outside_the_vm_process_are_a_blind_spot() {
    use tickscope_agent::wire::BlindSpotCheck;
    // (the VM's threads, the blind spots expected)
    type Case<'a> = (&'a [(u32, &'a str)], &'a [BlindSpotCheck]);
    let cases: [Case; 2] = [
        (
            &[(4200, "qemu-system-x86"), (4201, "CPU 0/TCG")],
            &[BlindSpotCheck::VhostWorkers],
        ),
        (
            &[
                (4200, "qemu-system-x86"),
                (4201, "CPU 0/TCG"),
                (4202, "vhost-4200"),
            ],
            &[],
        ),
    ];
    for (threads, expected) in cases {
        let proc = tempfile::tempdir().unwrap();
        let pid = 4200;
        let write = |at: u64| {
            let run: Vec<(u32, &str, u64)> = threads.iter().map(|t| (t.0, t.1, 100 + at)).collect();
            write_process(
                proc.path(),
                &FakeProcess {
                    pid,
                    comm: "qemu-system-x86",
                    argv: &[
                        "/usr/bin/qemu-system-x86_64",
                        "-name",
                        "guest=router,debug-threads=on",
                        "-netdev",
                        "tap,id=n0,vhost=on",
                    ],
                    cpu_ticks: 100 + at,
                    start_ticks: 7,
                    threads: &run,
                    schedstat: true,
                },
            );
            for t in threads {
                set_run_ns(proc.path(), pid, t.0, 1_000_000_000 * (1 + at), 100 + at);
            }
        };
        write(0);
        let fd = proc.path().join(format!("{pid}/fd"));
        fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink("/dev/vhost-net", fd.join("20")).unwrap();
        let mut sampler = Sampler::new(proc.path(), CLK_TCK);
        assert!(sampler.cycle().unwrap().is_none());
        write(1);
        let measured = sampler.cycle().unwrap().unwrap();
        let checks: Vec<_> = measured.blind_spots.iter().map(|s| s.check).collect();
        assert_eq!(checks, expected, "{threads:?}");
        if let Some(spot) = measured.blind_spots.first() {
            assert!(spot.detail.contains("\"router\""), "{}", spot.detail);
        } else {
            let parts = measured.guests[0].cpu_parts.as_ref().expect("a split");
            assert!(parts.vhost_s > 0.0, "{parts:?}");
        }
    }
}
