"""What the benchmarks (scripts/capacity.py, scripts/hostile.py) share: failing a step with a
message, numbers from the environment, percentiles, the server's listening line, running a tool
and reading /proc. Standard library only; each script's --self-test covers what it uses.
"""

import math
import re
import subprocess
import sys
import os


class StepFailed(Exception):
    """A step of the benchmark failed; the message says which and why."""


def env_number(name, default, kind=float):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise StepFailed(f"{name}={raw!r} is not a number")


def percentile(values, p):
    """The nearest-rank percentile `p` (0-100) of `values`; None if there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def listening_url(log):
    """The base URL from the server's `listening on http://...` log line, or None."""
    m = re.search(r"listening on (https?://[0-9A-Za-z.:\[\]]+)", log)
    return m.group(1) if m else None


def status_kib(status_text, key):
    """A `Key:   N kB` value of /proc/<pid>/status, in KiB, or None."""
    m = re.search(rf"^{key}:\s+(\d+) kB", status_text, re.M)
    return int(m.group(1)) if m else None


def run_tool(argv, what, stdin_text=None):
    done = subprocess.run(argv, input=stdin_text, capture_output=True, text=True)
    if done.returncode != 0:
        raise StepFailed(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def say(text):
    print(text, file=sys.stderr, flush=True)


def fmt(value, digits=1):
    return "—" if value is None else f"{value:,.{digits}f}"
