#!/usr/bin/env python3
"""Measures how many host-side vCPU wake-ups one guest timer tick costs under QEMU's TCG.

Boots idle guests under `qemu-system-x86_64 -accel tcg`, two at a time (1 and 2 vCPUs of one
kernel set-up; one at a time with --separately), each with the guest probe of scripts/probe-initramfs.sh on its second serial
port, and measures them over a few intervals with the real agent (`tickscope-agent once`): the
vCPU wake-ups per vCPU per second it reports (what the server judges), next to the guest's own
local timer interrupts per CPU per second (`LOC` in /proc/interrupts, from the probe's facts) and
its jiffies rate (read from the channel by this script, which holds it open). Alongside, it reads the vCPU threads' voluntary and involuntary context
switches from /proc itself, so that wake-ups can be told from preemptions by other work on the
host.

Set-ups: the Debian cloud kernel of scripts/guest-assets.sh with `nohz=off` and without (its
default, tickless), and the kernel of scripts/periodic-kernel.sh (built without NO_HZ, 1000 Hz).

Usage: scripts/calibrate-tcg.py [--interval S] [--rounds N] [--separately] [--no-probe]
                                [--json FILE]
Needs: qemu-system-x86, a built agent (cargo build --workspace --bins), and what
scripts/guest-assets.sh and scripts/periodic-kernel.sh prepare (it runs them; they are cached).
Takes about (boot + rounds x interval) per set-up: some 4-5 minutes with the defaults.
The figures and how they were taken are in docs/calibration.md.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import socket
import tempfile
import threading
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BOOT_TIMEOUT_S = 300
VCPU_THREAD = re.compile(r"^CPU \d+/TCG$")


def run_script(name, *args):
    out = subprocess.run(
        [str(TOP / "scripts" / name), *args], check=True, stdout=subprocess.PIPE, text=True
    )
    return out.stdout.strip()


def boot(name, vcpus, uuid, kernel, initrd, append, work, probe):
    serial = work / f"{name}.serial"
    socket = work / f"tickscope-{name}.sock"
    command = [
        "qemu-system-x86_64", "-accel", "tcg", "-m", "256", "-smp", str(vcpus),
        "-name", f"guest={name},debug-threads=on", "-uuid", uuid,
        "-display", "none", "-monitor", "none", "-no-reboot", "-nodefaults",
        "-kernel", str(kernel), "-initrd", str(initrd),
        "-append", f"console=ttyS0 quiet panic=-1 {append}".strip(),
        "-serial", f"file:{serial}",
    ]
    if probe:
        command += ["-serial", f"unix:{socket},server=on,wait=off"]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return process, serial, socket


def wait_for_boot(serial, started):
    while True:
        try:
            if "tickscope-guest: booted" in serial.read_text(errors="replace"):
                return
        except FileNotFoundError:
            pass
        if time.monotonic() - started > BOOT_TIMEOUT_S:
            sys.exit(f"{serial} did not boot in {BOOT_TIMEOUT_S} s")
        time.sleep(0.5)


class FactsReader(threading.Thread):
    """Holds the guest's probe channel open and keeps every line of facts with when it came.

    `tickscope-agent once` connects anew each run, and a connection made while QEMU has not yet
    taken back the last one's end delivers nothing within the run; one connection for the whole
    set-up does not miss deliveries. The agent then measures the host side only.
    """

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.lines = []  # (monotonic time, facts)
        self.stop = threading.Event()

    def run(self):
        sock = socket.socket(socket.AF_UNIX)
        while not self.stop.is_set():
            try:
                sock.connect(str(self.path))
                break
            except OSError:
                time.sleep(0.2)
        sock.settimeout(0.5)
        pending = b""
        while not self.stop.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                break
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                try:
                    self.lines.append((time.monotonic(), json.loads(line)))
                except ValueError:
                    pass  # a line cut by the connection's start
        sock.close()

    def between(self, start, end):
        return [facts for at, facts in self.lines if start <= at <= end]


def mean_of(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def vcpu_switches(pid):
    """Voluntary and involuntary context switches summed over the process's vCPU threads."""
    voluntary = involuntary = threads = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not VCPU_THREAD.match((task / "comm").read_text().strip()):
                continue
            status = (task / "status").read_text()
        except FileNotFoundError:
            continue
        threads += 1
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary, threads


def other_qemus(own):
    """QEMU processes on this host that this script did not start: they compete for the CPUs."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            if (entry / "comm").read_text().strip().startswith("qemu-system"):
                count += 1
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return count


def measure(setup, built_hz, guests, agent, interval_s, rounds):
    """Rounds of `tickscope-agent once` over the booted guests; one row per guest and round."""
    rows = []
    pids = {g["name"]: g["process"].pid for g in guests}
    guests_by_name = {g["name"]: g for g in guests}
    for round_no in range(1, rounds + 1):
        load = Path("/proc/loadavg").read_text().split()[0]
        competing = other_qemus(set(pids.values()))
        before = {name: vcpu_switches(pid) for name, pid in pids.items()}
        t0 = time.monotonic()
        out = subprocess.run(
            [str(agent), "once", "--interval", str(interval_s)],
            check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        elapsed = time.monotonic() - t0
        after = {name: vcpu_switches(pid) for name, pid in pids.items()}
        report = json.loads(out.stdout)
        length_s = report["interval"]["length_ns"] / 1e9
        for sample in report["guests"]:
            name = sample["name"]
            if name not in pids:
                continue  # another QEMU on this host
            vcpus = sample["vcpus"]
            # The facts the probe delivered during the round (one every 5 s, each measured
            # over 1 s).
            delivered = guests_by_name[name]["facts"].between(t0, t0 + elapsed)
            facts = delivered[-1] if delivered else {}
            config = facts.get("config") or {}
            loc = mean_of(f.get("local_timer_irqs_per_cpu_s") for f in delivered)
            measured_hz = mean_of(f.get("measured_hz") for f in delivered)
            wakeups = sample["vcpu_wakeups"] / vcpus / length_s
            voluntary = (after[name][0] - before[name][0]) / vcpus / elapsed
            involuntary = (after[name][1] - before[name][1]) / vcpus / elapsed
            rows.append({
                "setup": setup,
                "guest": name,
                "vcpus": vcpus,
                "round": round_no,
                "length_s": round(length_s, 2),
                "host_load_1min": float(load),
                "other_qemus": competing,
                "wakeups_source": sample["wakeups_source"],
                "host_cpu_pct_per_vcpu": 100 * sample["host_cpu_seconds"] / length_s / vcpus,
                "wakeups_per_vcpu_s": wakeups,
                "voluntary_per_vcpu_s": voluntary,
                "involuntary_per_vcpu_s": involuntary,
                "vcpu_threads_seen": after[name][2],
                "config_hz": config.get("hz") or built_hz,
                "config_hz_from": "facts" if config.get("hz") else "build config",
                "measured_hz": measured_hz,
                "facts_deliveries": len(delivered),
                "loc_per_cpu_s": loc,
                "nohz_mode": (facts.get("dynticks") or {}).get("nohz_mode"),
                "cmdline": facts.get("cmdline"),
                "kernel_release": facts.get("kernel_release"),
                "wakeups_per_loc": wakeups / loc if loc else None,
                "voluntary_per_loc": voluntary / loc if loc else None,
                "wakeups_per_config_hz": wakeups / (config.get("hz") or built_hz),
            })
    return rows


def fmt(value, digits=0):
    return "–" if value is None else f"{value:.{digits}f}"


def print_tables(rows):
    print("| set-up | vCPUs | round | load | host CPU %/vCPU | wake-ups/vCPU/s (agent) "
          "| voluntary | involuntary | guest LOC/CPU/s | guest HZ (jiffies) | CONFIG_HZ "
          "| wake-ups per LOC | wake-ups per CONFIG_HZ |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setup']} | {r['vcpus']} | {r['round']} | {r['host_load_1min']:.1f} "
              f"| {fmt(r['host_cpu_pct_per_vcpu'], 2)} | {fmt(r['wakeups_per_vcpu_s'])} "
              f"| {fmt(r['voluntary_per_vcpu_s'])} | {fmt(r['involuntary_per_vcpu_s'])} "
              f"| {fmt(r['loc_per_cpu_s'])} | {fmt(r['measured_hz'])} | {fmt(r['config_hz'])} "
              f"| {fmt(r['wakeups_per_loc'], 2)} | {fmt(r['wakeups_per_config_hz'], 2)} |")
    print()
    print("| set-up | vCPUs | rounds | wake-ups/vCPU/s mean (min-max) "
          "| wake-ups per CONFIG_HZ mean (min-max) | wake-ups per LOC mean (min-max) "
          "| voluntary per LOC mean (min-max) |")
    print("|---|---|---|---|---|---|---|")
    keys = sorted({(r["setup"], r["vcpus"]) for r in rows}, key=lambda k: (SETUPS_ORDER.index(k[0]), k[1]))
    for setup, vcpus in keys:
        group = [r for r in rows if r["setup"] == setup and r["vcpus"] == vcpus]
        w = [r["wakeups_per_vcpu_s"] for r in group]
        print(f"| {setup} | {vcpus} | {len(group)} | {statistics.mean(w):.0f} "
              f"({min(w):.0f}-{max(w):.0f}) | {spread(group, 'wakeups_per_config_hz')} "
              f"| {spread(group, 'wakeups_per_loc')} "
              f"| {spread(group, 'voluntary_per_loc')} |")


def spread(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    if not values:
        return "–"
    return f"{statistics.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


SETUPS_ORDER = ["debian-nohz-off", "debian-tickless", "periodic-1000"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=15.0, help="seconds per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds between the last boot and the first round")
    parser.add_argument("--agent", type=Path, default=TOP / "target/debug/tickscope-agent")
    parser.add_argument("--setups", default=",".join(SETUPS_ORDER))
    parser.add_argument("--vcpus", type=lambda t: [int(v) for v in t.split(",")], default=[1, 2],
                        help="the guests' vCPU counts, e.g. 1,2")
    parser.add_argument("--separately", action="store_true",
                        help="boot and measure each guest alone instead of a set-up's together")
    parser.add_argument("--no-probe", action="store_true",
                        help="boot the idle initramfs of guest-assets.sh instead, without the "
                        "probe or its channel: the host side alone, no guest figures")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    args = parser.parse_args()
    if not args.agent.is_file():
        sys.exit(f"{args.agent} is missing: cargo build --workspace --bins")

    assets = Path(run_script("guest-assets.sh"))
    periodic = Path(run_script("periodic-kernel.sh"))
    work = Path(tempfile.mkdtemp(prefix="tickscope-calibrate-"))
    try:
        if args.no_probe:
            initrd = assets / "initramfs.gz"
        else:
            initrd = work / "probe.gz"
            subprocess.run([str(TOP / "scripts/probe-initramfs.sh"), str(args.agent),
                            str(initrd)], check=True)
        setups = {
            "debian-nohz-off": (assets / "vmlinuz", "nohz=off", assets / "kernel.config"),
            "debian-tickless": (assets / "vmlinuz", "", assets / "kernel.config"),
            "periodic-1000": (periodic / "bzImage", "", periodic / "config"),
        }
        # Guests measured together: both vCPU counts of a set-up at once, or each on its own.
        batches = []
        for n, setup in enumerate(args.setups.split(",")):
            sizes = [[v] for v in args.vcpus] if args.separately else [args.vcpus]
            batches += [(n, setup, vcpus) for vcpus in sizes]
        rows = []
        for n, setup, sizes in batches:
            kernel, append, config_file = setups[setup]
            # The kernel's CONFIG_HZ from its build config, for when no facts say it.
            built_hz = int(re.search(r"^CONFIG_HZ=(\d+)$", config_file.read_text(), re.M)[1])
            guests = []
            try:
                started = time.monotonic()
                for vcpus in sizes:
                    name = f"{setup}-{vcpus}cpu"
                    uuid = f"00000000-0000-4000-8000-0000000d{n:02d}{vcpus:02d}"
                    process, serial, channel = boot(name, vcpus, uuid, kernel, initrd, append,
                                                    work, not args.no_probe)
                    guests.append({"name": name, "process": process, "serial": serial,
                                   "facts": FactsReader(channel)})
                for g in guests:
                    wait_for_boot(g["serial"], started)
                    if not args.no_probe:
                        g["facts"].start()
                print(f"{setup} {sizes} vCPUs: booted in {time.monotonic() - started:.0f} s",
                      file=sys.stderr)
                time.sleep(args.settle)
                rows += measure(setup, built_hz, guests, args.agent, args.interval, args.rounds)
            finally:
                for g in guests:
                    g["facts"].stop.set()
                    g["process"].kill()
                    g["process"].wait()
        print_tables(rows)
        if args.json:
            args.json.write_text("".join(json.dumps(r) + "\n" for r in rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
