#!/usr/bin/env python3
"""Hostile load: what one attacker credential does to everyone else. For each attack "shape",
one attacker attacks the real release server while a victim agent reports and a victim viewer
reads; the victims' p95 latency under attack is compared with their p95 on an idle server.

Run through scripts/hostile.sh, which builds the release binaries first; or directly:

    python3 scripts/hostile.py SERVER_BINARY [SHAPE ...]      (default: every shape)

Method. One database is made once in a temporary directory with the real CLI (`token add`,
`user add`): a victim agent token, an attacker agent token, a victim and an attacker viewer
token, an attacker guest token, a second guest token (the victim guest's probe) and a dashboard
user. Every phase below copies that database and runs `tickscope-server serve` on it afresh
(port picked by the kernel, found in its `listening on http://` log line; TICKSCOPE_LOG=info,
the log kept to count its lines), so that the shapes do not leak into each other; it is
stopped with SIGTERM (SIGKILL if it has not stopped 15 s later).

The victims, the same in every phase, connect from 127.0.0.1, a new connection per request,
with a 30 s client timeout (a timeout or a connection error is a failure and counts as 30 s):
  - the victim agent posts a report of its host `victim-hv` (20 guests with UUIDs, the next seq
    each time), waits 0.5 s, and again;
  - the victim viewer reads GET /api/v1/guests?limit=100 every 0.25 s;
  - /healthz is read every 0.5 s.
An answer other than 200 is a failure too (its latency is kept as measured).

Idle: a fresh server, the victims alone for HOSTILE_IDLE_S (15). Then per shape: a fresh
server; the victim agent reports once and the viewer reads once (the server works); the attack
starts in a child process (so that its Python work does not hold this process's GIL while the
victims are timed; it still shares the machine's CPUs with the server, as a real attacker on the
same host would, but at the lowest priority, nice 19, as if it came from another machine);
HOSTILE_ATTACK_WARM_S (5) later the victims run for HOSTILE_MEASURE_S (15);
requests they started in that window are waited for, then the attack stops. Attackers connect
from 127.0.0.2 (loopback is a /8 on Linux), so that a per-address limit can tell them apart.

The shapes (their counts are in the notes column):
  body-agent     16 chunked uploads (no Content-Length) to /api/v1/reports with the attacker's
                 agent token: headers and `1\\r\\n{\\r\\n`, then a 1-byte chunk every 3 s; any the
                 server ends is reopened. Counts the server's answers and closes.
  body-guest     the same with 1,024 uploads to /api/v1/guest-facts with a guest token.
  validation     2 loops posting a 10,000-guest report, every guest `web` without a UUID and
                 the last one invalid (`vcpus: 0`): 422, nothing stored.
  big-host       valid 10,000-guest reports of the attacker's host, in a loop.
  churn          reports of 1,000 never-seen UUIDs each, in a loop; then the live fleet's size
                 (`matching` of GET /api/v1/guests?limit=1).
  streams        a 5,000-guest report of the attacker's host (and another every 2 s), and 318
                 slow readers of GET /api/v1/guests (no limit: streamed) with the attacker's
                 viewer token, each reading the headers and then 1 byte a second (receive buffer
                 4 KiB); the server's VmRSS before the attack and at the end of the measurement.
  login          30 concurrent wrong-password logins for one name, in a loop; the first burst's
                 answers (401: the password was hashed and checked; 429: held back).
  account        the user logs in, then 40 concurrent password changes with a wrong current
                 password, once, as the measurement starts (422: checked; 429: held back).
  logs           accepted 10,000-guest reports whose guests each carry `probe_direct` facts
                 (refused inside a host report, so left out): the log lines written meanwhile.
  facts-binding  a correctness check, no load and no victims: the victim's host reports a VM
                 with UUID U, a guest token posts facts for U, the attacker's host reports a VM
                 with the same U, the same guest token posts facts again; which host's guest got
                 the second facts ("victim host" is right, "attacker host" is the bug).
  connections    4,225 connections, each sending only the head of a 64 KiB POST /login and no
                 body, held open (reopened when the server ends one).

Besides, over each measurement: the server's CPU, this benchmark's (its own and the attack
process's) and everything else's on the machine (from /proc/stat): other work (a build) skews
the figures, and the output says when it used a quarter of a core or more; the server's largest
VmRSS and open descriptors (sampled every 0.5 s) and the lines its log gained.

The table's ratio is attack p95 / idle p95 (the goal: at most 2 for every shape). It is a
benchmark: it prints figures and exits 0 when it ran, 1 when a step could not run (the server
would not start, a shape could not run). Standard library only; `--self-test` checks the pure
helpers (percentiles, parsing, the reports built, the table).
"""

import collections
import errno
import http.client
import json
import multiprocessing
import os
import re
import resource
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

from benchlib import (
    StepFailed,
    env_number,
    fmt,
    listening_url,
    percentile,
    run_tool,
    say,
    status_kib,
)

SHAPES = [
    "body-agent", "body-guest", "validation", "big-host", "churn", "streams", "login",
    "account", "logs", "facts-binding", "connections",
]
GOAL_RATIO = 2.0
CLIENT_TIMEOUT_S = 30.0
VICTIM_SOURCE = "127.0.0.1"
ATTACKER_SOURCE = "127.0.0.2"
SERVER_HOST = "127.0.0.1"

VICTIM_HOST = "victim-hv"
ATTACKER_HOST = "attacker-hv"
VICTIM_GUESTS = 20
VICTIM_REPORT_PAUSE_S = 0.5
VIEWER_EVERY_S = 0.25
HEALTHZ_EVERY_S = 0.5
VIEWER_PATH = "/api/v1/guests?limit=100"

BODY_AGENT_UPLOADS = 16
BODY_GUEST_UPLOADS = 1024
BODY_TICK_EVERY_S = 3.0
VALIDATION_LOOPS = 2
BIG_GUESTS = 10_000
CHURN_GUESTS = 1_000
STREAM_GUESTS = 5_000
STREAM_REPORT_EVERY_S = 2.0
STREAM_READERS = 318
STREAM_RCVBUF = 4096
LOGIN_THREADS = 30
ACCOUNT_BURST = 40
LOG_GUESTS = 10_000
CONNECTIONS = 4_225

USER_NAME = "operator"
SERVER_STOP_S = 15.0

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100



# ---------------------------------------------------------------- pure helpers (self-tested)



def ratio_text(attack, idle, goal=GOAL_RATIO):
    """attack / idle to two places, in bold when over the goal; "—" without both."""
    if attack is None or not idle:
        return "—"
    r = attack / idle
    text = f"{r:,.2f}"
    return f"**{text}**" if r > goal else text


def arrow(idle, attack):
    return f"{fmt(idle)} → {fmt(attack)}"


def counts_text(counts):
    """A Counter as `200×3, 503×1`: numbers (statuses) first in order, then words."""
    if not counts:
        return "none"
    keys = sorted(counts, key=lambda k: (0, k, "") if isinstance(k, int) else (1, 0, str(k)))
    return ", ".join(f"{k}×{counts[k]:,}" for k in keys)


def markdown_table(headers, rows):
    """A Markdown table; `|` in a cell is escaped."""
    def cell(v):
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def status_of(data):
    """The status of an HTTP/1.x answer's first line in `data`, or None while it is not there."""
    end = data.find(b"\r\n")
    if end < 0:
        return None
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data[:end])
    return int(m.group(1)) if m else -1


def head_complete(data):
    return b"\r\n\r\n" in data


def chunk(payload):
    """One chunk of a chunked body."""
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def csrf_in(html):
    """The CSRF token a form carries, or None."""
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    return m.group(1) if m else None


def cookie_in(set_cookies, name):
    """`name=value` of the Set-Cookie headers given, or None."""
    for value in set_cookies:
        if value.startswith(name + "="):
            return value.split(";", 1)[0]
    return None



def cpu_ticks(stat_line):
    """utime + stime (clock ticks) from a /proc/<pid>/stat line; the name may hold spaces."""
    fields = stat_line[stat_line.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def busy_ticks(stat_line):
    """Clock ticks the machine's CPUs spent busy, from the `cpu` line of /proc/stat (all but
    idle and iowait; guest time is inside user)."""
    values = [int(v) for v in stat_line.split()[1:9]]
    return sum(values) - values[3] - values[4]


def parse_shapes(args):
    """The shapes named (in the benchmark's order), every shape for none; StepFailed for an
    unknown name."""
    if not args:
        return list(SHAPES)
    unknown = [a for a in args if a not in SHAPES]
    if unknown:
        raise StepFailed(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    return [s for s in SHAPES if s in args]


def guest_sample(name, pid, uid=None, vcpus=1, cpu_s=0.03, wakeups=400, facts=None):
    """One wire `GuestSample` (a QEMU VM, vCPU threads counted)."""
    g = {"hypervisor": "qemu", "name": name, "pid": pid, "vcpus": vcpus,
         "host_cpu_seconds": cpu_s, "vcpu_wakeups": wakeups, "wakeups_source": "vcpu_threads"}
    if uid is not None:
        g["uuid"] = uid
    if facts is not None:
        g["facts"] = facts
    return g


def report_json(agent_id, run_id, seq, host, guests_text, now_ms):
    """A report's body (bytes) with the guests already as JSON text (big lists are made once
    and reused): a 10 s interval ending 1 s before `now_ms`."""
    end = now_ms - 1000
    head = json.dumps({
        "agent": {"id": agent_id, "run_id": run_id, "version": "0.1.0"},
        "seq": seq,
        # A host with the cores to run the attacker's 10,000 idle VMs: the server refuses a host
        # whose VMs together use more CPU than it has.
        "host": {"name": host, "cpus": 1024, "kernel": "6.1.0"},
        "interval": {"start_ms": end - 10_000, "end_ms": end, "length_ns": 10_000_000_000},
    })
    return (head[:-1] + ', "guests": ' + guests_text + "}").encode()


def fixed_uuid(kind, i):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tickscope-hostile/{kind}/{i}"))


def victim_guests_text():
    return json.dumps([guest_sample(f"victim-vm-{i:02d}", 10_000 + i, fixed_uuid("victim", i))
                       for i in range(VICTIM_GUESTS)])


def big_guests_text(n, kind="big"):
    """`n` valid guests with UUIDs of their own, idle figures."""
    return json.dumps([guest_sample(f"{kind}-{i:05d}", 20_000 + i, fixed_uuid(kind, i),
                                    cpu_s=0.01, wakeups=100) for i in range(n)])


def invalid_guests_text(n):
    """`n` guests all named `web`, none with a UUID, the last one invalid (`vcpus: 0`)."""
    guests = [guest_sample("web", 30_000 + i) for i in range(n)]
    guests[-1]["vcpus"] = 0
    return json.dumps(guests)


def churn_guests_text(n):
    """`n` guests never seen before: fresh random UUIDs."""
    return json.dumps([guest_sample(f"churn-{u[:8]}", 40_000 + i, u)
                       for i, u in enumerate(str(uuid.uuid4()) for _ in range(n))])


def logged_guests_text(n, received_ms):
    """`n` valid guests each carrying `probe_direct` facts, which a host report may not carry:
    each guest's facts are left out (and said so in the log), the report is stored."""
    out = []
    for i in range(n):
        u = fixed_uuid("logs", i)
        facts = {"source": "probe_direct", "received_ms": received_ms,
                 "facts": {"kernel_release": "6.1.0-logs", "dmi_uuid": u, "config": {}}}
        out.append(guest_sample(f"logs-{i:05d}", 50_000 + i, u, cpu_s=0.01, wakeups=100,
                                facts=facts))
    return json.dumps(out)


def self_test():
    log = "2026-12-03T20:00:00Z INFO tickscope-server listening on http://127.0.0.1:40123 max=1"
    status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
    stat = "123 (tokio-rt worker) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 9"
    body = report_json("a", "r", 7, "h", big_guests_text(3), 1_000_000)
    report = json.loads(body)
    invalid = json.loads(invalid_guests_text(4))
    churn_a, churn_b = json.loads(churn_guests_text(3)), json.loads(churn_guests_text(3))
    logged = json.loads(logged_guests_text(2, 5))
    big = json.loads(big_guests_text(50))

    def raises(f):
        try:
            f()
        except StepFailed:
            return True
        return False

    cases = [
        ("percentile of nothing", percentile([], 95), None),
        ("percentile of one", percentile([5], 95), 5),
        ("p50 of 1..100", percentile(list(range(1, 101)), 50), 50),
        ("p95 of 1..100", percentile(list(range(1, 101)), 95), 95),
        ("p95 of 100..1", percentile(list(range(100, 0, -1)), 95), 95),
        ("p95 with an outlier", percentile([1, 2, 3, 1000], 95), 1000),
        ("p95 of 20 with one slow", percentile([1.0] * 19 + [30_000.0], 95), 1.0),
        ("ratio", ratio_text(3.0, 2.0), "1.50"),
        ("ratio over the goal", ratio_text(50.0, 2.0), "**25.00**"),
        ("ratio without idle", ratio_text(3.0, None), "—"),
        ("ratio without attack", ratio_text(None, 2.0), "—"),
        ("arrow", arrow(1.234, 30_000.0), "1.2 → 30,000.0"),
        ("counts", counts_text(collections.Counter({503: 2, 200: 5, "timeout": 1})),
         "200×5, 503×2, timeout×1"),
        ("no counts", counts_text(collections.Counter()), "none"),
        ("markdown", markdown_table(["a", "b"], [["1", "x|y"]]),
         "| a | b |\n|---|---|\n| 1 | x\\|y |"),
        ("status", status_of(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n"), 408),
        ("no status yet", status_of(b"HTTP/1.1 40"), None),
        ("not HTTP", status_of(b"garbage\r\n"), -1),
        ("head complete", head_complete(b"HTTP/1.1 200 OK\r\na: b\r\n\r\n{"), True),
        ("head incomplete", head_complete(b"HTTP/1.1 200 OK\r\na: b\r\n"), False),
        ("chunk", chunk(b"{"), b"1\r\n{\r\n"),
        ("chunk of 26", chunk(b"a" * 26)[:4], b"1a\r\n"),
        ("csrf", csrf_in('<input type="hidden" name="csrf" value="0a1B2c">'), "0a1B2c"),
        ("no csrf", csrf_in("<form></form>"), None),
        ("cookie", cookie_in(["a=1; Path=/", "tickscope_login=xyz; HttpOnly"],
                             "tickscope_login"), "tickscope_login=xyz"),
        ("no cookie", cookie_in(["a=1"], "tickscope_session"), None),
        ("listening", listening_url(log), "http://127.0.0.1:40123"),
        ("not listening", listening_url("starting"), None),
        ("VmRSS", status_kib(status, "VmRSS"), 1024),
        ("no VmRSS", status_kib("Name:\tx\n", "VmRSS"), None),
        ("utime + stime", cpu_ticks(stat), 267),
        ("busy ticks", busy_ticks("cpu  100 5 50 1000 20 1 2 3 7 0"), 161),
        ("every shape", parse_shapes([]), SHAPES),
        ("shapes in order", parse_shapes(["logs", "churn"]), ["churn", "logs"]),
        ("unknown shape", raises(lambda: parse_shapes(["nope"])), True),
        ("report seq", report["seq"], 7),
        ("report interval", (report["interval"]["start_ms"], report["interval"]["end_ms"]),
         (989_000, 999_000)),
        ("report guests", len(report["guests"]), 3),
        ("big guests distinct", len({g["uuid"] for g in big}), 50),
        ("victim guests", len(json.loads(victim_guests_text())), VICTIM_GUESTS),
        ("invalid: all web", {g["name"] for g in invalid}, {"web"}),
        ("invalid: no uuid", any("uuid" in g for g in invalid), False),
        ("invalid: only the last", [g["vcpus"] for g in invalid], [1, 1, 1, 0]),
        ("churn: new uuids", {g["uuid"] for g in churn_a} & {g["uuid"] for g in churn_b}, set()),
        ("pool notes", pool_notes({"wanted": 10, "max_open": 9, "pending_at_end": 1,
                                   "answers": {408: 3}, "events": {
                                       "connected": 12, "closed by the server": 2,
                                       "refused (ECONNREFUSED)": 1}}),
         "open at most 9/10; connected 12 times; ended by the server 5 (answered 408×3, "
         "closed by the server 2); refused 1 (refused (ECONNREFUSED) 1); "
         "still connecting at the end 1"),
        ("stream pool notes", pool_notes({"wanted": 2, "max_open": 2, "pending_at_end": 0,
                                          "answers": {200: 2}, "events": {"connected": 2}},
                                         streams=True),
         "open at most 2/2; connected 2 times; answers 200×2; ended by the server 0; "
         "refused 0; still connecting at the end 0"),
        ("logged facts", logged[1]["facts"]["source"], "probe_direct"),
        ("logged facts' uuid", logged[1]["facts"]["facts"]["dmi_uuid"], logged[1]["uuid"]),
    ]
    failed = [(what, got, want) for what, got, want in cases if got != want]
    for what, got, want in failed:
        print(f"hostile.py self-test: {what}: got {got!r}, expected {want!r}", file=sys.stderr)
    print(f"{len(cases) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


# ---------------------------------------------------------------- HTTP


class Answer:
    def __init__(self, status, headers, set_cookies, body, seconds):
        self.status = status
        self.headers = headers
        self.set_cookies = set_cookies
        self.body = body
        self.seconds = seconds

    def text(self):
        return self.body.decode("utf-8", "replace")


def request(port, method, path, headers=None, body=None, source=VICTIM_SOURCE,
            timeout_s=CLIENT_TIMEOUT_S):
    """One request on a new connection from `source`, timed to the last byte."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection(SERVER_HOST, port, timeout=timeout_s,
                                      source_address=(source, 0))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        seconds = time.perf_counter() - started
        got = {k.lower(): v for k, v in response.getheaders()}
        return Answer(response.status, got, response.msg.get_all("Set-Cookie") or [], data,
                      seconds)
    finally:
        conn.close()


def attempt(port, method, path, headers=None, body=None, source=VICTIM_SOURCE):
    """(outcome, seconds): the status, or `timeout` / `error ...` with 30 s; an answer that
    took longer than the client timeout in all is a `timeout` too."""
    started = time.perf_counter()
    try:
        answer = request(port, method, path, headers, body, source)
    except socket.timeout:
        return "timeout", CLIENT_TIMEOUT_S
    except (OSError, http.client.HTTPException) as e:
        name = errno.errorcode.get(getattr(e, "errno", None) or 0) or type(e).__name__
        return f"error {name}", CLIENT_TIMEOUT_S
    if time.perf_counter() - started > CLIENT_TIMEOUT_S:
        return "timeout", CLIENT_TIMEOUT_S
    return answer.status, answer.seconds


def bearer(token, json_body=False):
    h = {"Authorization": f"Bearer {token}"}
    if json_body:
        h["Content-Type"] = "application/json"
    return h


# ---------------------------------------------------------------- processes


class Processes:
    """The children this run started, killed by pid on the way out whatever happened."""

    def __init__(self):
        self.children = []

    def start(self, what, argv, stdout, stderr, env=None):
        try:
            child = subprocess.Popen(argv, stdout=stdout, stderr=stderr,
                                     stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            raise StepFailed(f"cannot start {what} ({argv[0]}): {e}")
        self.children.append((what, child))
        return child

    def stop(self, child, timeout_s=SERVER_STOP_S):
        """SIGTERM, then SIGKILL after `timeout_s`; returns (exit status, whether killed)."""
        killed = False
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                killed = True
        self.children = [(w, c) for (w, c) in self.children if c is not child]
        return child.returncode, killed

    def kill_all(self):
        for _, child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait()
        self.children = []



def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def count_lines(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


class Server:
    def __init__(self, processes, binary, db, log_path):
        self.processes = processes
        self.binary = binary
        self.db = db
        self.log_path = log_path
        self.child = None
        self.port = None

    def start(self, deadline_s=60.0):
        log = open(self.log_path, "w")
        self.child = self.processes.start(
            "tickscope-server",
            [self.binary, "serve", "--listen", "127.0.0.1:0", "--db", self.db],
            stdout=subprocess.DEVNULL, stderr=log,
            env=dict(os.environ, TICKSCOPE_LOG="info", NO_COLOR="1"),
        )
        log.close()
        deadline = time.monotonic() + deadline_s
        base = None
        while base is None:
            if self.child.poll() is not None:
                raise StepFailed(f"the server exited ({self.child.returncode}) before listening; "
                                 f"its log:\n{tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise StepFailed(f"the server did not listen within {deadline_s:.0f} s")
            with open(self.log_path, errors="replace") as f:
                base = listening_url(f.read())
            if base is None:
                time.sleep(0.05)
        self.port = urllib.parse.urlsplit(base).port
        while True:
            outcome, _ = attempt(self.port, "GET", "/healthz")
            if outcome == 200:
                return
            if self.child.poll() is not None or time.monotonic() > deadline:
                raise StepFailed(f"/healthz did not answer 200 ({outcome}); its log:\n"
                                 + tail(self.log_path))
            time.sleep(0.1)

    def stop(self):
        status, killed = self.processes.stop(self.child)
        self.child = None
        return status, killed

    @property
    def pid(self):
        return self.child.pid

    def rss_kib(self):
        try:
            with open(f"/proc/{self.child.pid}/status") as f:
                return status_kib(f.read(), "VmRSS")
        except (OSError, AttributeError):
            return None

    def fds(self):
        try:
            return len(os.listdir(f"/proc/{self.child.pid}/fd"))
        except (OSError, AttributeError):
            return None

    def cpu_s(self):
        try:
            with open(f"/proc/{self.child.pid}/stat") as f:
                return cpu_ticks(f.read()) / CLOCK_TICKS
        except (OSError, AttributeError):
            return None


class Monitor:
    """The server's largest VmRSS and open descriptors, sampled every 0.5 s while it runs."""

    def __init__(self, server):
        self.server = server
        self.max_rss_kib = 0
        self.max_fds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.max_rss_kib = max(self.max_rss_kib, self.server.rss_kib() or 0)
            self.max_fds = max(self.max_fds, self.server.fds() or 0)
            self._stop.wait(0.5)

    def stop(self):
        self._stop.set()
        self._thread.join()


class CpuMeter:
    """Cores used over a measurement by the server, by this benchmark (this process and the
    attack's) and by everything else on the machine (other work skews the figures)."""

    def __init__(self, server, attack_pid=None):
        self.server = server
        self.attack_pid = attack_pid
        self.start = self._read()

    def _read(self):
        with open("/proc/stat") as f:
            machine = busy_ticks(f.readline()) / CLOCK_TICKS
        own = os.times()
        bench = own.user + own.system
        if self.attack_pid is not None:
            try:
                with open(f"/proc/{self.attack_pid}/stat") as f:
                    bench += cpu_ticks(f.read()) / CLOCK_TICKS
            except OSError:
                pass
        return time.monotonic(), machine, self.server.cpu_s() or 0.0, bench

    def stop(self):
        """{"server", "bench", "other"}: cores over the time since the start."""
        end = self._read()
        elapsed = end[0] - self.start[0]
        machine, server, bench = ((e - s) / elapsed for e, s in zip(end[1:], self.start[1:]))
        return {"server": server, "bench": bench, "other": max(0.0, machine - server - bench)}


# ---------------------------------------------------------------- the victims


class Seq:
    """The victim agent's sequence numbers: one run for the whole benchmark."""

    def __init__(self):
        self._next = 0
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            n = self._next
            self._next += 1
            return n


class Victims:
    """The victim agent, the victim viewer and the health prober, each in a thread; each
    request's (latency ms, outcome) is kept."""

    NAMES = ("report", "viewer", "healthz")

    def __init__(self, port, ctx):
        self.port = port
        self.ctx = ctx
        self.samples = {name: [] for name in self.NAMES}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._reporter, daemon=True),
            threading.Thread(target=self._every, daemon=True,
                             args=("viewer", VIEWER_EVERY_S, VIEWER_PATH,
                                   bearer(ctx["tokens"]["victim-viewer"]))),
            threading.Thread(target=self._every, daemon=True,
                             args=("healthz", HEALTHZ_EVERY_S, "/healthz", {})),
        ]

    def start(self):
        for t in self._threads:
            t.start()

    def stop(self):
        """Stops asking; waits for the requests under way (30 s at most each)."""
        self._stop.set()
        for t in self._threads:
            t.join()
        return self.samples

    def _record(self, name, outcome, seconds):
        self.samples[name].append((seconds * 1000.0, outcome))

    def _reporter(self):
        while not self._stop.is_set():
            outcome, seconds = post_victim_report(self.port, self.ctx)
            self._record("report", outcome, seconds)
            self._stop.wait(VICTIM_REPORT_PAUSE_S)

    def _every(self, name, every_s, path, headers):
        next_at = time.monotonic()
        while not self._stop.is_set():
            outcome, seconds = attempt(self.port, "GET", path, headers)
            self._record(name, outcome, seconds)
            next_at += every_s
            pause = next_at - time.monotonic()
            if pause > 0:
                self._stop.wait(pause)
            else:
                next_at = time.monotonic()


def post_victim_report(port, ctx):
    body = report_json(ctx["victim_agent_id"], ctx["victim_run_id"], ctx["seq"].take(),
                       VICTIM_HOST, ctx["victim_guests"], int(time.time() * 1000))
    return attempt(port, "POST", "/api/v1/reports",
                   bearer(ctx["tokens"]["victim-agent"], json_body=True), body)


def summarise(samples):
    """Per victim: p50, p95, max (ms), requests, failures and their outcomes."""
    out = {}
    for name, rows in samples.items():
        ms = [m for m, _ in rows]
        bad = collections.Counter(o for _, o in rows if o != 200)
        out[name] = {"p50": percentile(ms, 50), "p95": percentile(ms, 95),
                     "max": max(ms) if ms else None, "n": len(rows),
                     "failed": sum(bad.values()), "failures": bad}
    return out


# ---------------------------------------------------------------- the attacks (child process)


class Tally:
    """Outcomes and latencies of an attacker's requests, shared by its threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()
        self.seconds = []

    def add(self, outcome, seconds):
        with self.lock:
            self.outcomes[outcome] += 1
            if isinstance(outcome, int):
                self.seconds.append(seconds)

    def result(self):
        with self.lock:
            return {"answers": dict(self.outcomes), "p50_s": percentile(self.seconds, 50),
                    "max_s": max(self.seconds) if self.seconds else None}


def attacker_post(ctx, path, token, body):
    return attempt(ctx["port"], "POST", path, bearer(token, json_body=True), body,
                   source=ATTACKER_SOURCE)


def post_loop(stop, tally, send):
    while not stop.is_set():
        outcome, seconds = send()
        tally.add(outcome, seconds)
        if not isinstance(outcome, int):
            stop.wait(0.2)


def in_threads(n, target, *args):
    threads = [threading.Thread(target=target, args=args, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


class AttackerReports:
    """The attacker agent's reports of its host, numbered in turn."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.run_id = secrets.token_hex(8)
        self.seq = Seq()

    def body(self, guests_text):
        return report_json("attacker-machine", self.run_id, self.seq.take(), ATTACKER_HOST,
                           guests_text, int(time.time() * 1000))

    def post(self, guests_text):
        return attacker_post(self.ctx, "/api/v1/reports", self.ctx["tokens"]["attacker-agent"],
                             self.body(guests_text))


class SocketPool:
    """`count` connections from the attacker's address, kept open by one thread with a
    selector: each sends `first` once connected, then `tick` every `tick_every_s` (bodies that
    trickle), or with `slow_read` reads its answer's head and then 1 byte a second. A connection
    the server ends (an answer, a close, a reset) or refuses is counted and opened again."""

    def __init__(self, port, count, first, tick=None, tick_every_s=BODY_TICK_EVERY_S,
                 slow_read=False, rcvbuf=None):
        self.port = port
        self.count = count
        self.first = first
        self.tick = tick
        self.tick_every_s = tick_every_s
        self.slow_read = slow_read
        self.rcvbuf = rcvbuf
        self.events = collections.Counter()   # connected, refused, closed, reset, ...
        self.answers = collections.Counter()  # statuses the server answered
        self.max_open = 0
        self.bytes_read = 0
        self.open_at_end = 0
        self.pending_at_end = 0

    def run(self, stop):
        sel = selectors.DefaultSelector()
        conns = {}
        next_tick = time.monotonic() + self.tick_every_s
        next_read = time.monotonic() + 1.0
        backoff_until = 0.0

        def end(st, why):
            s = st["sock"]
            if st.get("registered"):
                sel.unregister(s)
            s.close()
            del conns[s]
            if why:
                self.events[why] += 1

        def send(st, data):
            try:
                st["sock"].send(data)
                return True
            except BlockingIOError:
                return True
            except OSError:
                end(st, "reset by the server")
                return False

        while not stop.is_set():
            now = time.monotonic()
            if now >= backoff_until:
                opened = 0
                while len(conns) < self.count and opened < 256:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    try:
                        if self.rcvbuf:
                            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
                        s.bind((ATTACKER_SOURCE, 0))
                        s.setblocking(False)
                        err = s.connect_ex((SERVER_HOST, self.port))
                    except OSError as e:
                        s.close()
                        self.events[f"local error {errno.errorcode.get(e.errno, e)}"] += 1
                        backoff_until = now + 0.5
                        break
                    if err not in (0, errno.EINPROGRESS):
                        s.close()
                        self.events[f"refused ({errno.errorcode.get(err, err)})"] += 1
                        backoff_until = now + 0.1
                        break
                    st = {"sock": s, "phase": "connecting", "buf": b"", "registered": True}
                    conns[s] = st
                    sel.register(s, selectors.EVENT_WRITE, st)
                    opened += 1
            for key, _mask in sel.select(timeout=0.1):
                st = key.data
                s = st["sock"]
                if s not in conns:
                    continue
                if st["phase"] == "connecting":
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        end(st, f"refused ({errno.errorcode.get(err, err)})")
                        continue
                    self.events["connected"] += 1
                    st["phase"] = "open"
                    sel.modify(s, selectors.EVENT_READ, st)
                    send(st, self.first)
                    continue
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    end(st, "reset by the server")
                    continue
                if not data:
                    end(st, "closed by the server without an answer" if not st["buf"]
                        else "closed by the server")
                    continue
                st["buf"] = (st["buf"] + data)[:16384]
                status = status_of(st["buf"])
                if status is None:
                    continue
                if not self.slow_read:
                    self.answers[status] += 1
                    end(st, None)  # answered: closed here, opened again
                elif head_complete(st["buf"]):
                    self.answers[status] += 1
                    if status != 200:
                        end(st, None)  # no stream to hold: opened again
                        continue
                    st["phase"] = "reading"
                    sel.unregister(s)
                    st["registered"] = False
            now = time.monotonic()
            if self.tick is not None and now >= next_tick:
                next_tick = now + self.tick_every_s
                for st in [st for st in conns.values() if st["phase"] == "open"]:
                    send(st, self.tick)
            if self.slow_read and now >= next_read:
                next_read = now + 1.0
                for st in [st for st in conns.values() if st["phase"] == "reading"]:
                    try:
                        got = st["sock"].recv(1)
                    except BlockingIOError:
                        continue
                    except OSError:
                        end(st, "reset by the server")
                        continue
                    if not got:
                        end(st, "closed by the server")
                    else:
                        self.bytes_read += 1
            self.max_open = max(self.max_open,
                                sum(1 for st in conns.values() if st["phase"] != "connecting"))
        self.open_at_end = sum(1 for st in conns.values() if st["phase"] != "connecting")
        self.pending_at_end = len(conns) - self.open_at_end
        for st in list(conns.values()):
            end(st, None)
        sel.close()

    def result(self):
        return {"wanted": self.count, "max_open": self.max_open, "events": dict(self.events),
                "answers": dict(self.answers), "open_at_end": self.open_at_end,
                "pending_at_end": self.pending_at_end, "bytes_read": self.bytes_read}


def chunked_head(port, path, token):
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()


def attack_body(ctx, stop, path, token, count):
    pool = SocketPool(ctx["port"], count, chunked_head(ctx["port"], path, token) + chunk(b"{"),
                      tick=chunk(b" "))
    pool.run(stop)
    return {"pool": pool.result()}


def attack_body_agent(ctx, stop, measuring):
    return attack_body(ctx, stop, "/api/v1/reports", ctx["tokens"]["attacker-agent"],
                       BODY_AGENT_UPLOADS)


def attack_body_guest(ctx, stop, measuring):
    return attack_body(ctx, stop, "/api/v1/guest-facts", ctx["tokens"]["attacker-guest"],
                       BODY_GUEST_UPLOADS)


def attack_validation(ctx, stop, measuring):
    reports = AttackerReports(ctx)
    guests = invalid_guests_text(BIG_GUESTS)
    tally = Tally()
    in_threads(VALIDATION_LOOPS, post_loop, stop, tally, lambda: reports.post(guests))
    stop.wait()
    return {"loop": tally.result()}


def attack_big_host(ctx, stop, measuring):
    reports = AttackerReports(ctx)
    guests = big_guests_text(BIG_GUESTS)
    tally = Tally()
    in_threads(1, post_loop, stop, tally, lambda: reports.post(guests))
    stop.wait()
    return {"loop": tally.result()}


def attack_churn(ctx, stop, measuring):
    reports = AttackerReports(ctx)
    tally = Tally()
    in_threads(1, post_loop, stop, tally, lambda: reports.post(churn_guests_text(CHURN_GUESTS)))
    stop.wait()
    return {"loop": tally.result()}


def attack_logs(ctx, stop, measuring):
    reports = AttackerReports(ctx)
    guests = logged_guests_text(LOG_GUESTS, int(time.time() * 1000))
    tally = Tally()
    in_threads(1, post_loop, stop, tally, lambda: reports.post(guests))
    stop.wait()
    return {"loop": tally.result()}


def attack_streams(ctx, stop, measuring):
    reports = AttackerReports(ctx)
    guests = big_guests_text(STREAM_GUESTS, kind="stream")
    first, seconds = reports.post(guests)
    if first != 200:
        return {"error": f"the attacker's {STREAM_GUESTS:,}-guest report answered {first}"}
    tally = Tally()
    tally.add(first, seconds)

    def every_2_s():
        while not stop.wait(STREAM_REPORT_EVERY_S):
            tally.add(*reports.post(guests))

    in_threads(1, every_2_s)
    request_head = (f"GET /api/v1/guests HTTP/1.1\r\nHost: 127.0.0.1:{ctx['port']}\r\n"
                    f"Authorization: Bearer {ctx['tokens']['attacker-viewer']}\r\n\r\n").encode()
    pool = SocketPool(ctx["port"], STREAM_READERS, request_head, slow_read=True,
                      rcvbuf=STREAM_RCVBUF)
    pool.run(stop)
    return {"pool": pool.result(), "loop": tally.result()}


def login_page(port, source):
    """(login cookie, csrf) of GET /login, or raises OSError / StepFailed."""
    page = request(port, "GET", "/login", source=source)
    cookie, csrf = cookie_in(page.set_cookies, "tickscope_login"), csrf_in(page.text())
    if page.status != 200 or not cookie or not csrf:
        raise StepFailed(f"GET /login answered {page.status} without its cookie or token")
    return cookie, csrf


def submit_login(port, cookie, csrf, name, password, source):
    form = urllib.parse.urlencode({"name": name, "password": password, "csrf": csrf})
    return request(port, "POST", "/login", {
        "Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}, form, source)


def attack_login(ctx, stop, measuring):
    port = ctx["port"]
    first_burst = collections.Counter()
    tally = Tally()
    barrier = threading.Barrier(LOGIN_THREADS)
    lock = threading.Lock()

    def worker():
        first = True
        while not stop.is_set():
            page = None
            for _ in range(20 if first else 1):
                try:
                    page = login_page(port, ATTACKER_SOURCE)
                    break
                except (OSError, StepFailed, http.client.HTTPException):
                    stop.wait(0.2)
            if first:
                try:
                    barrier.wait(timeout=CLIENT_TIMEOUT_S)
                except threading.BrokenBarrierError:
                    pass
            if page is None:
                outcome, seconds = "no login page", 0.0
            else:
                started = time.perf_counter()
                try:
                    answer = submit_login(port, *page, USER_NAME, "wrong-password-" +
                                          secrets.token_hex(4), ATTACKER_SOURCE)
                    outcome, seconds = answer.status, answer.seconds
                except (OSError, http.client.HTTPException) as e:
                    outcome, seconds = f"error {type(e).__name__}", time.perf_counter() - started
            if first:
                with lock:
                    first_burst[outcome] += 1
                first = False
            tally.add(outcome, seconds)

    in_threads(LOGIN_THREADS, worker)
    stop.wait()
    return {"first_burst": dict(first_burst), "loop": tally.result()}


def attack_account(ctx, stop, measuring):
    port = ctx["port"]
    try:
        cookie, csrf = login_page(port, ATTACKER_SOURCE)
        answer = submit_login(port, cookie, csrf, USER_NAME, ctx["password"], ATTACKER_SOURCE)
        session = cookie_in(answer.set_cookies, "tickscope_session")
        if answer.status != 303 or not session:
            return {"error": f"logging in answered {answer.status}"}
        page = request(port, "GET", "/account", {"Cookie": session}, source=ATTACKER_SOURCE)
        csrf = csrf_in(page.text())
        if page.status != 200 or not csrf:
            return {"error": f"GET /account answered {page.status} without a CSRF token"}
    except (OSError, StepFailed, http.client.HTTPException) as e:
        return {"error": f"could not log in: {e}"}
    # The burst as the victims' measurement starts.
    while not measuring.wait(0.1):
        if stop.is_set():
            return {"error": "stopped before the measurement began"}
    tally = Tally()
    barrier = threading.Barrier(ACCOUNT_BURST)
    form = urllib.parse.urlencode({"csrf": csrf, "current": "not-the-password-at-all",
                                   "password": "a-new-password-1234",
                                   "again": "a-new-password-1234"})

    def change():
        try:
            barrier.wait(timeout=CLIENT_TIMEOUT_S)
        except threading.BrokenBarrierError:
            pass
        tally.add(*attempt(port, "POST", "/account/password", {
            "Cookie": session, "Content-Type": "application/x-www-form-urlencoded"}, form,
            source=ATTACKER_SOURCE))

    started = time.monotonic()
    for t in in_threads(ACCOUNT_BURST, change):
        t.join()
    burst_s = time.monotonic() - started
    stop.wait()
    return {"loop": tally.result(), "burst_s": burst_s}


def attack_connections(ctx, stop, measuring):
    head = ("POST /login HTTP/1.1\r\nHost: x\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            "Content-Length: 65536\r\n\r\n").encode()
    pool = SocketPool(ctx["port"], CONNECTIONS, head)
    pool.run(stop)
    return {"pool": pool.result()}


ATTACKS = {
    "body-agent": attack_body_agent,
    "body-guest": attack_body_guest,
    "validation": attack_validation,
    "big-host": attack_big_host,
    "churn": attack_churn,
    "streams": attack_streams,
    "login": attack_login,
    "account": attack_account,
    "logs": attack_logs,
    "connections": attack_connections,
}


def attack_child(shape, ctx, conn, stop, measuring):
    """The attack's process: runs it until `stop`, sends back what it counted. It runs at the
    lowest priority: an attacker elsewhere does not take this machine's CPU from the server, and
    the figures are to say what the attack does through the server, not beside it."""
    os.nice(19)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        result = ATTACKS[shape](ctx, stop, measuring)
    except Exception as e:  # reported as the shape's failure
        result = {"error": f"{type(e).__name__}: {e}"}
    conn.send(result)
    conn.close()


class Attack:
    """An attack in a child process of its own."""

    def __init__(self, shape, ctx):
        mp = multiprocessing.get_context("fork")
        self.stop_event = mp.Event()
        self.measuring = mp.Event()
        self.results, sender = mp.Pipe(duplex=False)
        self.process = mp.Process(target=attack_child, daemon=True,
                                  args=(shape, ctx, sender, self.stop_event, self.measuring))
        self.process.start()
        sender.close()

    def stop(self, timeout_s=30.0):
        self.stop_event.set()
        result = {"error": "the attack did not report back"}
        try:
            if self.results.poll(timeout_s):
                result = self.results.recv()
        except (EOFError, OSError):
            result = {"error": f"the attack process died ({self.process.exitcode})"}
        self.process.join(5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        return result


# ---------------------------------------------------------------- the run



def raise_open_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def make_template(binary, work):
    """The database every phase starts from: tokens and the user, made with the CLI."""
    db = os.path.join(work, "template", "hostile.db")
    os.makedirs(os.path.dirname(db))
    tokens = {}
    for name, role in [("victim-agent", "agent"), ("attacker-agent", "agent"),
                       ("victim-viewer", "viewer"), ("attacker-viewer", "viewer"),
                       ("attacker-guest", "guest"), ("victim-guest", "guest")]:
        out = run_tool([binary, "token", "add", name, "--role", role, "--db", db],
                       f"token add {name}")
        tokens[name] = out.strip().splitlines()[-1].strip()
    password = "hostile-" + secrets.token_hex(12)
    run_tool([binary, "user", "add", USER_NAME, "--role", "viewer", "--db", db],
             "user add", stdin_text=password + "\n")
    return db, tokens, password


def fresh_db(template_db, work, phase):
    """A copy of the template database (every file of it) for one phase."""
    folder = os.path.join(work, phase)
    os.makedirs(folder)
    base = os.path.basename(template_db)
    for name in os.listdir(os.path.dirname(template_db)):
        if name.startswith(base):
            shutil.copy2(os.path.join(os.path.dirname(template_db), name), folder)
    return os.path.join(folder, base)


def prime(port, ctx):
    """The victim agent reports once, the viewer reads once: the server works."""
    outcome, _ = post_victim_report(port, ctx)
    if outcome != 200:
        raise StepFailed(f"the victim's first report answered {outcome}")
    outcome, _ = attempt(port, "GET", VIEWER_PATH, bearer(ctx["tokens"]["victim-viewer"]))
    if outcome != 200:
        raise StepFailed(f"the victim viewer's first read answered {outcome}")


def run_idle(config, ctx, processes, work):
    say(f"idle: victims alone for {config['idle_s']:g} s")
    server = Server(processes, ctx["binary"], fresh_db(ctx["template_db"], work, "idle"),
                    os.path.join(work, "idle.log"))
    server.start()
    try:
        prime(server.port, ctx)
        meter = CpuMeter(server)
        victims = Victims(server.port, ctx)
        victims.start()
        time.sleep(config["idle_s"])
        samples = victims.stop()
        cpu = meter.stop()
        rss = server.rss_kib()
    finally:
        server.stop()
    return {"victims": summarise(samples), "cpu": cpu, "rss_mib": (rss or 0) / 1024}


def facts_binding(port, ctx):
    """The correctness check: on which host's guest do a guest token's second facts land?"""
    u = fixed_uuid("victim", 0)
    guest_token = ctx["tokens"]["victim-guest"]

    def post_facts(kernel):
        body = json.dumps({"facts": {"dmi_uuid": u, "kernel_release": kernel, "config": {}}})
        return attempt(port, "POST", "/api/v1/guest-facts", bearer(guest_token, True),
                       body.encode())[0]

    steps = {}
    steps["victim facts"] = post_facts("victim-kernel")
    time.sleep(0.2)
    impostor = json.dumps([guest_sample("impostor", 60_000, u)])
    reports = AttackerReports({"port": port, "tokens": ctx["tokens"]})
    steps["attacker report"] = reports.post(impostor)[0]
    time.sleep(0.2)
    steps["second facts"] = post_facts("second-post")
    landed, seen = [], []
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        answer = request(port, "GET", "/api/v1/guests", bearer(ctx["tokens"]["victim-viewer"]))
        if answer.status != 200:
            raise StepFailed(f"GET /api/v1/guests answered {answer.status}")
        same = [g for g in json.loads(answer.text())["guests"] if g.get("uuid") == u]
        seen = [(g.get("host"), g.get("kernel_release")) for g in same]
        landed = [host for host, kernel in seen if kernel == "second-post"]
        if landed:
            break
        time.sleep(0.25)
    where = ", ".join("victim host" if h == VICTIM_HOST else
                      "attacker host" if h == ATTACKER_HOST else str(h) for h in landed)
    return {"steps": steps, "landed": where or "nowhere", "seen": seen}


def run_shape(shape, config, ctx, processes, work):
    say(f"{shape}: fresh server")
    server = Server(processes, ctx["binary"], fresh_db(ctx["template_db"], work, shape),
                    os.path.join(work, f"{shape}.log"))
    server.start()
    row = {"shape": shape}
    attack = monitor = None
    try:
        prime(server.port, ctx)
        if shape == "facts-binding":
            row["facts"] = facts_binding(server.port, ctx)
            return row
        actx = {"port": server.port, "tokens": ctx["tokens"], "password": ctx["password"]}
        row["rss_before_mib"] = (server.rss_kib() or 0) / 1024
        lines0, t_attack = count_lines(server.log_path), time.monotonic()
        attack = Attack(shape, actx)
        monitor = Monitor(server)
        say(f"  attacking; the victims start in {config['warm_s']:g} s")
        time.sleep(config["warm_s"])
        if not attack.process.is_alive():
            raise StepFailed(f"the attack ended early ({attack.stop()})")
        meter, t0 = CpuMeter(server, attack.process.pid), time.monotonic()
        victims = Victims(server.port, ctx)
        victims.start()
        attack.measuring.set()
        time.sleep(config["measure_s"])
        row["rss_end_mib"] = (server.rss_kib() or 0) / 1024
        samples = victims.stop()
        cpu, t1 = meter.stop(), time.monotonic()
        say(f"  measured {t1 - t0:.0f} s; stopping the attack")
        result = attack.stop()
        attack = None
        lines1, t_end = count_lines(server.log_path), time.monotonic()
        monitor.stop()
        monitor_max = (monitor.max_rss_kib, monitor.max_fds)
        monitor = None
        if "error" in result:
            raise StepFailed(f"the {shape} attack failed: {result['error']}")
        row.update(
            victims=summarise(samples), attack=result,
            cpu=cpu,
            rss_max_mib=monitor_max[0] / 1024, fds_max=monitor_max[1],
            log_lines=lines1 - lines0, log_s=t_end - t_attack,
        )
        if shape == "churn":
            answer = request(server.port, "GET", "/api/v1/guests?limit=1",
                             bearer(ctx["tokens"]["victim-viewer"]))
            row["matching"] = (json.loads(answer.text()).get("matching")
                               if answer.status == 200 else f"answered {answer.status}")
        return row
    finally:
        if attack is not None:
            attack.stop(timeout_s=5.0)
        if monitor is not None:
            monitor.stop()
        status, killed = server.stop()
        if killed:
            row["stopped"] = f"killed: still running {SERVER_STOP_S:g} s after SIGTERM"
        elif status not in (0, -signal.SIGTERM):
            row["stopped"] = f"exited {status} on SIGTERM"


def pool_notes(pool, streams=False):
    """What a SocketPool counted. Holding connections: every answer ended one early. Readers
    of a stream: the answers' statuses (a 200 is then read slowly, others are reopened)."""
    events = pool["events"]
    closed = sorted((k, v) for k, v in events.items() if k.startswith(("closed", "reset")))
    refused = sorted((k, v) for k, v in events.items() if k.startswith(("refused", "local")))
    answered = sum(pool["answers"].values())
    parts = [f"open at most {pool['max_open']:,}/{pool['wanted']:,}",
             f"connected {events.get('connected', 0):,} times"]
    ends = [f"{k} {v:,}" for k, v in closed]
    if streams:
        parts.append(f"answers {counts_text(pool['answers'])}")
    elif answered:
        ends.insert(0, f"answered {counts_text(pool['answers'])}")
    total = sum(v for _, v in closed) + (0 if streams else answered)
    parts.append(f"ended by the server {total:,}" + (f" ({', '.join(ends)})" if ends else ""))
    parts.append(f"refused {sum(v for _, v in refused):,}"
                 + (f" ({', '.join(f'{k} {v:,}' for k, v in refused)})" if refused else ""))
    parts.append(f"still connecting at the end {pool['pending_at_end']:,}")
    return "; ".join(parts)


def loop_notes(loop):
    return (f"answers {counts_text(loop['answers'])}, p50 {fmt(loop['p50_s'], 2)} s, "
            f"max {fmt(loop['max_s'], 2)} s")


def notes_for(row):
    shape = row["shape"]
    if "error" in row:
        return f"could not run: {row['error']}"
    if shape == "facts-binding":
        f = row["facts"]
        return (f"second-post landed on: {f['landed']} (answers: "
                + ", ".join(f"{k} {v}" for k, v in f["steps"].items())
                + "; the guests with U and their kernel_release: "
                + (", ".join(f"{h} {k}" for h, k in f["seen"]) or "none") + ")")
    a = row["attack"]
    notes = []
    if "pool" in a:
        notes.append(("readers: " if shape == "streams" else "")
                     + pool_notes(a["pool"], streams=shape == "streams"))
    if shape == "streams":
        notes.append(f"VmRSS {fmt(row['rss_before_mib'])} → {fmt(row['rss_end_mib'])} MiB "
                     f"(max {fmt(row['rss_max_mib'])}); reader bytes read "
                     f"{a['pool']['bytes_read']:,}; attacker reports {loop_notes(a['loop'])}")
    elif shape == "login":
        notes.append(f"first burst of {LOGIN_THREADS}: {counts_text(a['first_burst'])}; "
                     f"all: {loop_notes(a['loop'])}")
    elif shape == "account":
        notes.append(f"burst of {ACCOUNT_BURST}: {loop_notes(a['loop'])}, "
                     f"{a['burst_s']:.1f} s in all")
    elif "loop" in a:
        notes.append(loop_notes(a["loop"]))
    if shape == "churn":
        notes.append(f"fleet after: {row['matching']} matching")
    if shape == "logs":
        notes.append(f"{row['log_lines']:,} log lines in {row['log_s']:.0f} s "
                     f"({row['log_lines'] / row['log_s']:,.0f}/s)")
    if row.get("stopped"):
        notes.append(f"server {row['stopped']}")
    return "; ".join(notes)


def failures_text(victims):
    failed = sum(v["failed"] for v in victims.values())
    total = sum(v["n"] for v in victims.values())
    detail = "; ".join(f"{name}: {counts_text(v['failures'])}"
                       for name, v in victims.items() if v["failed"])
    return f"{failed:,}/{total:,}" + (f" ({detail})" if detail else "")


def print_tables(rows, idle, config):
    iv = idle["victims"]
    headers = ["shape", "report p95 ms idle → attack", "ratio", "viewer p95 ms idle → attack",
               "ratio", "healthz p95 ratio", "victim failures", "notes"]
    table = [["idle", arrow(iv["report"]["p95"], iv["report"]["p95"]), "1.00",
              arrow(iv["viewer"]["p95"], iv["viewer"]["p95"]), "1.00", "1.00",
              failures_text(iv), f"healthz p95 {fmt(iv['healthz']['p95'], 2)} ms; server CPU "
              f"{idle['cpu']['server']:.2f} cores, VmRSS {idle['rss_mib']:.0f} MiB"]]
    for row in rows:
        v = row.get("victims")
        if v is None:
            table.append([row["shape"], "—", "—", "—", "—", "—", "—", notes_for(row)])
            continue
        table.append([
            row["shape"],
            arrow(iv["report"]["p95"], v["report"]["p95"]),
            ratio_text(v["report"]["p95"], iv["report"]["p95"]),
            arrow(iv["viewer"]["p95"], v["viewer"]["p95"]),
            ratio_text(v["viewer"]["p95"], iv["viewer"]["p95"]),
            ratio_text(v["healthz"]["p95"], iv["healthz"]["p95"]),
            failures_text(v),
            notes_for(row),
        ])
    print()
    print(f"### Victims under attack (goal: every ratio ≤ {GOAL_RATIO:g}; bold: over it)")
    print()
    print(markdown_table(headers, table))
    print()
    print("### Details (ms: p50 / p95 / max, requests)")
    print()
    detail_headers = ["shape", "report", "viewer", "healthz",
                      "CPU cores: server / benchmark / other", "VmRSS max (MiB)",
                      "open fds max", "log lines (per s)"]

    def cores(c):
        return f"{c['server']:.2f} / {c['bench']:.2f} / {c['other']:.2f}"


    def lat(s):
        return f"{fmt(s['p50'])} / {fmt(s['p95'])} / {fmt(s['max'])} ({s['n']})"

    detail = [["idle", lat(iv["report"]), lat(iv["viewer"]), lat(iv["healthz"]),
               cores(idle["cpu"]), fmt(idle["rss_mib"]), "—", "—"]]
    for row in rows:
        v = row.get("victims")
        if v is None:
            continue
        detail.append([row["shape"], lat(v["report"]), lat(v["viewer"]), lat(v["healthz"]),
                       cores(row["cpu"]), fmt(row["rss_max_mib"]), f"{row['fds_max']:,}",
                       f"{row['log_lines']:,} ({row['log_lines'] / row['log_s']:,.1f})"])
    print(markdown_table(detail_headers, detail))
    busy = [(r["shape"], r["cpu"]["other"]) for r in rows if "cpu" in r]
    busy = [(n, c) for n, c in [("idle", idle["cpu"]["other"])] + busy if c >= 0.25]
    if busy:
        print()
        print("warning: other processes used CPU while the victims were measured ("
              + ", ".join(f"{n} {c:.2f} cores" for n, c in busy)
              + f" of {os.cpu_count()}): those figures are skewed; run again on a quiet machine")


def machine_model():
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            return m.group(1).strip() if m else "unknown"
    except OSError:
        return "unknown"


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) < 2 or argv[1].startswith("-"):
        print(f"usage: hostile.py SERVER_BINARY [SHAPE ...]\nshapes: {' '.join(SHAPES)}",
              file=sys.stderr)
        return 2
    binary = os.path.abspath(argv[1])
    try:
        shapes = parse_shapes(argv[2:])
        config = {
            "idle_s": env_number("HOSTILE_IDLE_S", 15.0),
            "warm_s": env_number("HOSTILE_ATTACK_WARM_S", 5.0),
            "measure_s": env_number("HOSTILE_MEASURE_S", 15.0),
        }
    except StepFailed as e:
        print(f"hostile: {e}", file=sys.stderr)
        return 2
    if not os.access(binary, os.X_OK):
        print(f"hostile: {binary} is not an executable", file=sys.stderr)
        return 1
    processes = Processes()

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, stop)
    rows = []
    started = time.monotonic()
    try:
        nofile = raise_open_files()
        print(f"tickscope hostile load: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
        print(f"machine: {os.cpu_count()} CPUs (nproc), {machine_model()}; load average "
              f"{os.getloadavg()[0]:.2f}; open files {nofile:,}")
        print(f"server: {binary}")
        print(f"idle {config['idle_s']:g} s; per shape: {config['warm_s']:g} s of attack, then "
              f"the victims measured for {config['measure_s']:g} s; shapes: {' '.join(shapes)}")
        sys.stdout.flush()
        with tempfile.TemporaryDirectory(prefix="tickscope-hostile-") as work:
            say("making the tokens and the user")
            template_db, tokens, password = make_template(binary, work)
            ctx = {"binary": binary, "template_db": template_db, "tokens": tokens,
                   "password": password, "seq": Seq(), "victim_agent_id": "victim-machine",
                   "victim_run_id": secrets.token_hex(8), "victim_guests": victim_guests_text()}
            idle = run_idle(config, ctx, processes, work)
            for shape in shapes:
                try:
                    rows.append(run_shape(shape, config, ctx, processes, work))
                except (StepFailed, OSError, http.client.HTTPException, ValueError) as e:
                    say(f"  {shape} could not run: {e}")
                    rows.append({"shape": shape, "error": str(e).splitlines()[0][:300]})
    except (StepFailed, OSError) as e:
        print(f"hostile: {e}", file=sys.stderr)
        return 1
    finally:
        processes.kill_all()
    print_tables(rows, idle, config)
    print()
    print(f"ran in {time.monotonic() - started:.0f} s; load average "
          f"{os.getloadavg()[0]:.2f} at the end")
    failed = [r["shape"] for r in rows if "error" in r]
    if failed:
        print(f"shapes that could not run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
