#!/usr/bin/env bash
# Runs schemathesis (property-based API testing, from PyPI) against the server's own
# /api/v1/openapi.json: a demo server on a throwaway database, every documented operation
# called with generated and mutated inputs under a fixed seed, and each answer checked for
# server errors and for conformance to the document (status, content type, headers, body schema).
#
# Before that, openapi-spec-validator (from PyPI) checks the served document as a whole.
#
# Needs python3 with venv (Debian: python3-venv), a server binary (cargo build first), and the
# network to PyPI the first time: schemathesis is installed into .cache/schemathesis-venv.
# Environment: SCHEMATHESIS_EXAMPLES (cases per operation and phase, default 100),
# SCHEMATHESIS_SEED (default 20261203), TICKSCOPE_SERVER (the binary, default target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."

version=4.32.5
venv=.cache/schemathesis-venv
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$version"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi
# openapi-spec-validator checks the document itself (structure, references, unique
# operationIds), as client generators read it; in its own venv, so that its pins and
# schemathesis's never meet.
validator_version=0.9.0
validator_venv=.cache/openapi-venv
if ! "$validator_venv/bin/pip" show openapi-spec-validator 2>/dev/null | grep -q "^Version: $validator_version$"; then
    python3 -m venv "$validator_venv"
    "$validator_venv/bin/pip" install --quiet --disable-pip-version-check "openapi-spec-validator==$validator_version"
fi

server=${TICKSCOPE_SERVER:-target/debug/tickscope-server}
examples=${SCHEMATHESIS_EXAMPLES:-100}
seed=${SCHEMATHESIS_SEED:-20261203}
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

db=$work/api.db
token() { "$server" token add "schemathesis-$1" --role "$1" --db "$db" "${@:2}" | tail -n 1; }
# Bound to the host the hooks give most reports, so that a generated report stored first
# cannot bind it to another and turn the rest away.
agent=$(token agent --host schemathesis-host)
viewer=$(token viewer)
guest=$(token guest)

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The demo fleet gives the read endpoints guests, plans, changes and alerts to answer with.
TICKSCOPE_LOG=warn "$server" serve --demo --db "$db" --listen "127.0.0.1:$port" \
    --alert-interval 1 --ingest-rate 100000 --ingest-burst 100000 >"$work/server.log" 2>&1 &
pid=$!
base=http://127.0.0.1:$port
for _ in $(seq 100); do
    curl -fsS "$base/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
# Let the first alert evaluation run, so /api/v1/alerts has alerts in it.
sleep 2

echo "openapi-spec-validator: the served document" >&2
curl -fsS "$base/api/v1/openapi.json" >"$work/openapi.json"
"$validator_venv/bin/openapi-spec-validator" "$work/openapi.json"

run() {
    local name=$1 token=$2
    shift 2
    echo "schemathesis: $name" >&2
    SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH=scripts \
        "$venv/bin/schemathesis" run "$base/api/v1/openapi.json" \
        --header "Authorization: Bearer $token" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
        --max-examples "$examples" --seed "$seed" --generation-database none \
        --workers 1 --no-color --report junit --report-junit-path "$work/$name.xml" \
        "$@"
    python3 - "$work/$name.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
suites = ET.parse(sys.argv[1]).getroot()
cases = sum(int(s.get("tests", 0)) for s in suites.iter("testsuite"))
failures = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites.iter("testsuite"))
print(f"schemathesis figures: {cases} operations, {failures} failing", file=sys.stderr)
EOF
}

# Each token reaches the operations of its role; the others answer it 403, which is checked to
# be documented too.
run viewer "$viewer" --include-method GET
run agent "$agent" --include-path /api/v1/reports
# Change records take the agent token of the guest's host: the demo's guests are on other
# hosts, so this fuzzes the refusals (403, 404, 409, 422) and their documentation.
run agent-changes "$agent" --include-operation-id record_guest_change
run guest "$guest" --include-path /api/v1/guest-facts
# How the generated reports fared at the edge: stored, duplicate or refused.
curl -fsS -H "Authorization: Bearer $viewer" "$base/metrics" |
    grep '^tickscope_ingest_reports_total' | sed 's/^/schemathesis figures: /' >&2
if grep -E "panicked|ERROR" "$work/server.log"; then
    echo "schemathesis.sh: the server logged errors (above)" >&2
    exit 1
fi
