#!/usr/bin/env bash
# Hostile load: one attacker credential against the release server while a victim agent reports
# and a victim viewer reads (scripts/hostile.py says how). Prints, per attack shape, the victims'
# p95 latency under attack against their idle p95 (the goal: at most 2x for every shape), their
# failures and what the attack counted. A benchmark: it exits 0 when it ran, whatever the figures.
#
#   scripts/hostile.sh [SHAPE ...]     default: every shape
#
# Shapes: body-agent body-guest validation big-host churn streams login account logs
# facts-binding connections. Environment (seconds): HOSTILE_IDLE_S (15), HOSTILE_ATTACK_WARM_S
# (5), HOSTILE_MEASURE_S (15). About 5 minutes for every shape on 2 cores, plus the release
# build; a quick look at one shape:
#
#   HOSTILE_IDLE_S=5 HOSTILE_MEASURE_S=5 scripts/hostile.sh validation
set -euo pipefail
cd "$(dirname "$0")/.."

python3 scripts/hostile.py --self-test >/dev/null
cargo build --release -p tickscope-server -p tickscope-agent --bins
target="${CARGO_TARGET_DIR:-target}/release"
exec python3 scripts/hostile.py "$target/tickscope-server" "$@"
