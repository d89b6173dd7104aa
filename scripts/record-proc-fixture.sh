#!/usr/bin/env bash
# Records what the agent reads of one process from /proc, twice, SECONDS apart, as a fixture for
# the discovery tests: DEST/t0/<pid>/... and DEST/t1/<pid>/...
# Usage: scripts/record-proc-fixture.sh PID DEST [SECONDS]
set -euo pipefail
pid=$1 dest=$2 gap=${3:-2}
snap() {
    local out=$1/$pid
    mkdir -p "$out/task"
    cp "/proc/$pid/stat" "/proc/$pid/cmdline" "$out/"
    for t in /proc/$pid/task/*; do
        tid=${t##*/}
        mkdir -p "$out/task/$tid"
        cp "$t/comm" "$t/status" "$out/task/$tid/" 2>/dev/null || true
    done
}
snap "$dest/t0"
sleep "$gap"
snap "$dest/t1"
