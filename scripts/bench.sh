#!/usr/bin/env bash
# Runs every benchmark and prints its figures with the ratio against its baseline from the same
# run: the agent's sampling cost beside Prometheus's node exporter (installed here from Debian,
# as root or with sudo), ingest against bare inserts, page and export latency at 1,000 and
# 10,000 guests, the database's size over 30 simulated days before and after the
# retention, and the release server's steady-state capacity with 10,000, 30,000 and 100,000
# simulated guests reporting (scripts/capacity.sh; its fleet sizes from CAPACITY_FLEETS). About
# 35 minutes on 2 cores. Figures of past runs: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg-query -W -f='${Status}' prometheus-node-exporter 2>/dev/null | grep -q "install ok installed"; then
    as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo)
    "${as_root[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends prometheus-node-exporter
fi

for vms in 50 500; do
    BENCH_VMS=$vms cargo bench -p tickscope-agent --bench agent_cycle
done
cargo bench -p tickscope-server --bench ingest
cargo bench -p tickscope-server --bench storage
cargo bench -p tickscope-server --bench pages
# Word splitting is wanted: CAPACITY_FLEETS is a list of sizes.
# shellcheck disable=SC2086
scripts/capacity.sh ${CAPACITY_FLEETS:-10000 30000 100000}
