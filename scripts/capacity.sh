#!/usr/bin/env bash
# The server's steady-state capacity: the release server, a simulated fleet reporting to it at
# the agents' interval, and a prober reading the pages meanwhile and then idle after a restart
# (scripts/capacity.py says how). Prints a table per fleet and whether its targets were met:
# issue 18's up to 30,000 guests (pages p95 <= 2 x idle p95 and < 100 ms, reports p99 < 1 s,
# server CPU < 1 core), issue 28's from 100,000 (pages < 50 ms, reports p99 < 500 ms, CPU
# < 0.5 cores, ready within 5 s of a restart, RSS < 600 MiB; on PostgreSQL p99 < 1 s, server
# and PostgreSQL < 1 core, ready within 10 s), and two servers at most 1.3 x one's CPU.
#
#   scripts/capacity.sh [GUESTS ...]       default: 10000 30000 100000 (hosts of 20 guests)
#   scripts/capacity.sh --all              every case of issue 28: SQLite 10,000, 30,000 and
#                                          100,000; PostgreSQL (a throwaway cluster of
#                                          scripts/postgres.sh) 10,000 and 100,000, and 30,000
#                                          with one server, then two. About 45 minutes.
#
# Environment (seconds unless said): CAPACITY_WARM_UP_S (30), CAPACITY_MEASURE_S (60),
# CAPACITY_IDLE_S (30), CAPACITY_INTERVAL_S (10), CAPACITY_GUESTS_PER_HOST (20),
# CAPACITY_PROBE_EVERY_S (1), CAPACITY_THREADS (simulator threads; default hosts/10, 4 to 500),
# CAPACITY_START_DEADLINE_S (300), CAPACITY_POSTGRES (a PostgreSQL server URL, a role that may
# create databases: each fleet then keeps its data in a new database there, and the table adds
# PostgreSQL's own CPU; scripts/postgres.sh starts a throwaway one), CAPACITY_SERVERS (1; 2
# with CAPACITY_POSTGRES: two servers on that database, half the hosts reporting to each; 1,2:
# each fleet with one, then two), CAPACITY_LOGS (a directory: each fleet's server logs and
# simulator output are kept there; the simulator's failed reports say when they failed, to be
# laid beside the server's log), CAPACITY_KEEP_DB (a directory: each fleet's SQLite database
# is copied there after its run, named by its guests, to profile a start on it). About 8
# minutes for the default fleets on 2 cores, plus the release build; a quick check:
#
#   CAPACITY_WARM_UP_S=20 CAPACITY_MEASURE_S=30 CAPACITY_IDLE_S=15 scripts/capacity.sh 2000
set -euo pipefail
cd "$(dirname "$0")/.."

python3 scripts/capacity.py --self-test >/dev/null
cargo build --release -p tickscope-server -p tickscope-agent --bins
target="${CARGO_TARGET_DIR:-target}/release"
binaries=("$target/tickscope-server" "$target/tickscope-agent")
if [ "${1:-}" != --all ]; then
    exec python3 scripts/capacity.py "${binaries[@]}" "$@"
fi
python3 scripts/capacity.py "${binaries[@]}" 10000 30000 100000
pg_dir=$(mktemp -d /tmp/tickscope-capacity-pg.XXXXXX)
trap 'scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir"' EXIT
pg_url=$(scripts/postgres.sh start "$pg_dir")
CAPACITY_POSTGRES=$pg_url python3 scripts/capacity.py "${binaries[@]}" 10000 100000
CAPACITY_POSTGRES=$pg_url CAPACITY_SERVERS=1,2 python3 scripts/capacity.py "${binaries[@]}" 30000
