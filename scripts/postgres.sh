#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 cluster for the tests (Debian's postgresql package; no
# systemd): initdb and pg_ctl as the postgres user, in a directory of its own, listening on
# 127.0.0.1 at a free port and on a socket in that directory, with a superuser role `tickscope`
# (password `tickscope`) that the tests use to make a database each. Prints the base URL to use
# as TICKSCOPE_TEST_POSTGRES (a test appends the name of its own database).
#
#   scripts/postgres.sh start DIR   start a cluster in DIR (made if missing), print its URL
#   scripts/postgres.sh stop DIR    stop it (the directory stays; rm -rf it after)
#
# Root runs the server as postgres (setpriv); anyone else runs it as themselves.
set -euo pipefail

bin=/usr/lib/postgresql/15/bin
say() { echo "postgres.sh: $*" >&2; }
[ -x "$bin/pg_ctl" ] || {
    say "PostgreSQL 15 is not installed (apt-get install postgresql)"
    exit 1
}

as_postgres=()
if [ "$(id -u)" -eq 0 ]; then
    as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || {
    say "usage: $0 start|stop DIR"
    exit 2
}
data=$dir/data

case $cmd in
start)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
    if [ ! -f "$data/PG_VERSION" ]; then
        pwfile=$dir/pw
        echo tickscope >"$pwfile"
        [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$pwfile"
        "${as_postgres[@]}" "$bin/initdb" -D "$data" -U tickscope --pwfile="$pwfile" \
            --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
        rm -f "$pwfile"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # Throwaway data: fsync off makes the test databases' many small commits cheap; every
    # other setting is the packaged default. max_connections covers the suite's parallel tests,
    # each with a pool of its own.
    "${as_postgres[@]}" "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=400" >/dev/null
    echo "$port" >"$dir/port"
    echo "postgres://tickscope:tickscope@127.0.0.1:$port"
    ;;
stop)
    [ -f "$data/PG_VERSION" ] || exit 0
    "${as_postgres[@]}" "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
    ;;
*)
    say "unknown command $cmd"
    exit 2
    ;;
esac
