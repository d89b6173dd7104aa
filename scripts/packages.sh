#!/usr/bin/env bash
# Builds the Debian packages of the agent and the server (cargo-deb, release build), installs
# them with dpkg on this machine, and runs what they installed the way their systemd units
# would, by hand (no systemd runs here): the server as user tickscope with its settings from
# /etc/tickscope/server.env; the agent as user tickscope-agent with the unit's capabilities,
# against a paused QEMU run by another user. Checks that a report reached the server, that the
# agent reads the VM's descriptors with both capabilities and with neither one alone, that
# systemd-analyze accepts the installed units (verify; security exposure at most 4.0 for the
# server, 5.0 for the agent), and that neither program made a system call its unit's filter
# refuses (under strace). Then purges the agent and rolls it out again with the Ansible
# collection's rollout role (contrib/ansible: a token per host from `token add --hosts-file`, the
# .deb installed, agent.env written, the first report checked; a host without a token refused),
# and removes and purges both packages and checks that nothing is left
# behind but the system users, which purging keeps (README, "Removing").
#
# `packages.sh --build` only builds the two packages (no root needed) and prints their paths: the
# test command runs it in the background while other tests run, and this test's own build then
# finds the binaries built and only packages them again.
#
# Root only (dpkg). Refuses to run when either package is installed already: it would purge it.
# Safe to run again; on failure it stops what it started, purges what it installed and deletes
# the users it caused. cargo-deb is installed into ~/.cargo once, at the version pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
# systemd-analyze security's threshold is ten times the exposure it prints.
MAX_EXPOSURE_SERVER=40
MAX_EXPOSURE_AGENT=50
TEST_HOST=pkgtest-host
UNITS=/lib/systemd/system

say() { echo "packages.sh: $*" >&2; }
fail() {
    say "FAIL: $*"
    exit 1
}

# cargo-deb, into ~/.cargo at the pinned version, then both packages: sets agent_deb and
# server_deb.
build() {
    if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
        say "installing cargo-deb $CARGO_DEB_VERSION into ~/.cargo"
        cargo install cargo-deb --version "=$CARGO_DEB_VERSION" --locked --quiet
    fi
    # One package at a time: built together, the agent would get the server's features of the
    # agent crate (Cargo unifies them), and with them code it does not need.
    agent_deb=$(cargo deb -p tickscope-agent | tail -n 1)
    server_deb=$(cargo deb -p tickscope-server | tail -n 1)
    [ -f "$agent_deb" ] && [ -f "$server_deb" ] || fail "cargo deb printed no package path"
}

if [ "${1:-}" = "--build" ]; then
    build
    echo "$agent_deb"
    echo "$server_deb"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "run as root: it installs packages with dpkg"

need=()
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v adduser >/dev/null || need+=(adduser)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v strace >/dev/null || need+=(strace)
command -v ansible-playbook >/dev/null || need+=(ansible)
/usr/bin/python3 -c 'import apt' 2>/dev/null || need+=(python3-apt)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

for package in tickscope-agent tickscope-server; do
    if dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qv '^not-installed$'; then
        fail "$package is installed on this machine (status $(dpkg-query -W -f='${db:Status-Status}' "$package")); this test would purge it. Purge it first: dpkg -P $package"
    fi
done

# dpkg, waiting for the lock while another apt or dpkg runs on this machine.
dpkg_() {
    local out tries=0
    until out=$(dpkg "$@" 2>&1); do
        if grep -q "lock" <<<"$out" && [ $((tries += 1)) -lt 60 ]; then
            sleep 5
            continue
        fi
        printf '%s\n' "$out" >&2
        return 1
    done
    printf '%s\n' "$out"
}

work=$(mktemp -d /tmp/tickscope-packages.XXXXXX)
chmod 755 "$work"
pids=()
made_users=()
for user in tickscope tickscope-agent; do
    getent passwd "$user" >/dev/null || made_users+=("$user")
done

# Stops a process this script started. A program run by as_user in the background is a
# subshell's child, or strace's child under the subshell when traced (strace ignores SIGTERM
# while it traces): the program gets SIGTERM, strace then ends with it, and the subshell with
# strace, so waiting for the subshell means that strace has written its output.
descendants() { # pid
    local child
    for child in $(pgrep -P "$1"); do
        echo "$child"
        descendants "$child"
    done
}
running() { # pid: exists and is not a zombie
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 1) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}
stop() { # pid
    local pid=$1 targets=() p
    for p in $(descendants "$pid"); do
        case "$(cat "/proc/$p/comm" 2>/dev/null)" in
        strace | bash) ;;
        *) targets+=("$p") ;;
        esac
    done
    [ ${#targets[@]} -gt 0 ] || targets=("$pid")
    kill "${targets[@]}" 2>/dev/null || true
    for _ in $(seq 100); do
        running "$pid" || break
        sleep 0.1
    done
    if running "$pid"; then
        say "process $pid did not stop on SIGTERM; killing it"
        kill -9 $(descendants "$pid") "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT
    for pid in "${pids[@]}"; do
        stop "$pid"
    done
    for package in tickscope-agent tickscope-server; do
        if dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qv '^not-installed$'; then
            say "cleanup: purging $package"
            dpkg_ -P "$package" >/dev/null || rc=1
        fi
    done
    # The users purging keeps, when this run made them.
    for user in "${made_users[@]}"; do
        if getent passwd "$user" >/dev/null; then
            deluser --system --quiet "$user" >/dev/null 2>&1 || rc=1
        fi
        if getent group "$user" >/dev/null; then
            delgroup --system --quiet "$user" >/dev/null 2>&1 || rc=1
        fi
    done
    if [ $rc -ne 0 ]; then
        for log in "$work"/*.log; do
            [ -s "$log" ] && { say "--- $log"; tail -n 30 "$log" >&2; }
        done
    fi
    rm -rf "$work"
    rm -f /var/cache/tickscope-agent.deb
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

started=$SECONDS

# --- Build --------------------------------------------------------------------------------------
build
say "built $agent_deb and $server_deb in $((SECONDS - started)) s"

# --- Install ------------------------------------------------------------------------------------
dpkg_ -i "$agent_deb" "$server_deb" >"$work/dpkg-install.log"
for file in /usr/bin/tickscope-server /usr/bin/tickscope-agent; do
    [ -x "$file" ] || fail "$file is not installed"
done
for unit in tickscope-server tickscope-agent; do
    [ -f "$UNITS/$unit.service" ] || fail "$UNITS/$unit.service is not installed"
done
for user in tickscope tickscope-agent; do
    getent passwd "$user" >/dev/null || fail "the postinst made no user $user"
done
check_mode() { # path, expected "mode user group" as stat prints it
    local got
    got=$(stat -c '%a %U %G' "$1")
    [ "$got" = "$2" ] || fail "$1 is $got, expected $2"
}
check_mode /etc/tickscope/server.env "640 root tickscope"
check_mode /etc/tickscope/agent.env "640 root tickscope-agent"
check_mode /var/lib/tickscope "750 tickscope tickscope"
check_mode /var/lib/tickscope-agent "700 tickscope-agent tickscope-agent"
# The agent joins the hypervisor's groups that exist on this machine.
for group in libvirt kvm libvirt-qemu; do
    if getent group "$group" >/dev/null; then
        id -nG tickscope-agent | tr ' ' '\n' | grep -qx "$group" ||
            fail "tickscope-agent is not in group $group"
        say "tickscope-agent is in group $group"
    fi
done
# Not enabled, not started: the settings come first.
if ls /etc/systemd/system/*.wants/tickscope-* >/dev/null 2>&1; then
    fail "the postinst enabled a unit"
fi

server_version=$(/usr/bin/tickscope-server --version)
agent_version=$(/usr/bin/tickscope-agent --version)
package_version=$(dpkg-query -W -f='${Version}' tickscope-server)
[[ "$server_version" == "tickscope-server ${package_version%-*}" ]] || fail "tickscope-server --version says '$server_version'"
[[ "$agent_version" == "tickscope-agent ${package_version%-*}" ]] || fail "tickscope-agent --version says '$agent_version'"
say "$server_version, $agent_version"

# --- The units ----------------------------------------------------------------------------------
for unit in tickscope-server tickscope-agent; do
    # Warnings (an unknown key, a missing binary) count as failures.
    out=$(systemd-analyze verify "$UNITS/$unit.service" 2>&1) || fail "systemd-analyze verify $unit: $out"
    [ -z "$out" ] || fail "systemd-analyze verify $unit: $out"
done
exposure() { # unit, threshold
    systemd-analyze security --offline=true --threshold="$2" "$UNITS/$1.service" >"$work/security-$1.log" 2>&1 ||
        fail "$1.service is more exposed than $(($2 / 10)).$(($2 % 10)): $(tail -n 1 "$work/security-$1.log")"
    say "$(tail -n 1 "$work/security-$1.log")"
}
exposure tickscope-server "$MAX_EXPOSURE_SERVER"
exposure tickscope-agent "$MAX_EXPOSURE_AGENT"

# A unit's environment as systemd builds it: its Environment= lines, then its EnvironmentFile=,
# whose lines win. Values here have no spaces or quotes, so no unquoting is needed.
unit_env() { # unit, env file
    sed -n 's/^Environment=//p' "$UNITS/$1.service"
    grep -E '^[A-Za-z_][A-Za-z0-9_]*=' "$2" || true
}
# The unit's capabilities in setpriv's syntax (+sys_ptrace,+dac_read_search), checked against
# its bounding set.
ambient=$(sed -n 's/^AmbientCapabilities=//p' "$UNITS/tickscope-agent.service")
bounding=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNITS/tickscope-agent.service")
[ -n "$ambient" ] && [ "$ambient" = "$bounding" ] ||
    fail "the agent unit's AmbientCapabilities= ($ambient) and CapabilityBoundingSet= ($bounding) differ"
unit_caps=$(tr ' ' '\n' <<<"$ambient" | sed 's/^CAP_/+/' | tr 'A-Z' 'a-z' | paste -sd, -)
[ -z "$(sed -n 's/^CapabilityBoundingSet=//p' "$UNITS/tickscope-server.service")" ] ||
    fail "the server unit keeps capabilities"

# Runs a command as a unit's user: its groups, no new privileges, umask 0077, cwd /, a clean
# environment, and only the capabilities given (setpriv's list, or empty for none). With
# trace_to set, under strace, for check_syscalls.
trace_to=
as_user() { # user, caps, command...
    local user=$1 caps=$2
    shift 2
    local privs=(--inh-caps "-all${caps:+,$caps}" --bounding-set "-all${caps:+,$caps}")
    [ -z "$caps" ] || privs+=(--ambient-caps "$caps")
    (
        umask 077
        cd /
        exec ${trace_to:+strace -f -qq -o "$trace_to"} env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${unit_environment[@]}" \
            setpriv --reuid "$user" --regid "$user" --init-groups --no-new-privs "${privs[@]}" -- "$@"
    )
}

# The seccomp filter is the one sandboxing setting a process can trip without systemd noticing:
# a call outside SystemCallFilter= fails with EPERM (SystemCallErrorNumber=). So every system
# call the program and its children made under strace, from its exec on, must be in the unit's
# filter, expanded as systemd does (groups within groups; an allow list first, then ~removals).
check_syscalls() { # unit, strace output, program
    python3 - "$UNITS/$1.service" "$2" "$3" <<'PY' || fail "$1 made system calls its unit's SystemCallFilter= refuses"
import re, subprocess, sys
unit, trace, program = sys.argv[1:]
groups, current = {}, None
for line in subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True).stdout.splitlines():
    if line.startswith("@"):
        current = groups.setdefault(line.strip(), [])
    elif current is not None and line.strip() and not line.strip().startswith("#"):
        current.append(line.strip())
def expand(names):
    out = set()
    for name in names:
        out |= expand(groups[name]) if name.startswith("@") else {name}
    return out
allowed = None
for line in open(unit):
    if line.startswith("SystemCallFilter="):
        value = line.split("=", 1)[1].split()
        if value[0].startswith("~"):
            allowed -= expand([value[0][1:]] + value[1:])
        else:
            allowed = (allowed or set()) | expand(value)
assert allowed, "no SystemCallFilter= allow list in " + unit
made, started = set(), False
for line in open(trace):
    m = re.match(r"\d+\s+([a-z0-9_]+)\((.*)", line)
    if not m:
        continue
    started = started or (m.group(1) == "execve" and m.group(2).startswith('"' + program + '"'))
    if started:
        made.add(m.group(1))
assert made, program + " never ran under strace"
refused = sorted(made - allowed)
print(f"{unit}: {len(made)} distinct system calls, refused by its filter: {', '.join(refused) or 'none'}", file=sys.stderr)
sys.exit(1 if refused else 0)
PY
}

# --- The server, as its unit runs it ------------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# As an admin would: uncomment and change the listen address in the settings file.
sed -i "s|^#TICKSCOPE_LISTEN=.*|TICKSCOPE_LISTEN=127.0.0.1:$port|" /etc/tickscope/server.env
grep -qx "TICKSCOPE_LISTEN=127.0.0.1:$port" /etc/tickscope/server.env || fail "server.env has no TICKSCOPE_LISTEN line to set"
mapfile -t unit_environment < <(unit_env tickscope-server /etc/tickscope/server.env)
trace_to=$work/server.strace as_user tickscope "" /usr/bin/tickscope-server serve >"$work/server.log" 2>&1 &
pids+=($!)
base=http://127.0.0.1:$port
for _ in $(seq 100); do
    curl -fsS "$base/healthz" >/dev/null 2>&1 && break
    kill -0 "${pids[-1]}" 2>/dev/null || fail "the installed server stopped at start"
    sleep 0.2
done
curl -fsS "$base/readyz" >/dev/null || fail "the installed server is not ready"
[ -f /var/lib/tickscope/tickscope.db ] || fail "the server's database is not where the unit says"
check_mode /var/lib/tickscope/tickscope.db "600 tickscope tickscope"

agent_token=$(as_user tickscope "" /usr/bin/tickscope-server token add "$TEST_HOST" --role agent --host "$TEST_HOST" 2>/dev/null | tail -n 1)
viewer_token=$(as_user tickscope "" /usr/bin/tickscope-server token add pkgtest-viewer --role viewer 2>/dev/null | tail -n 1)
[ -n "$agent_token" ] && [ -n "$viewer_token" ] || fail "token add printed no token"

# --- A VM run by another user, and the agent's privileges ---------------------------------------
# A paused QEMU (-S) that another user runs: root with KVM, as under Proxmox, where /dev/kvm
# works; else nobody under TCG, as libvirt runs its VMs as libvirt-qemu.
start_vm() { # user, accelerator
    vm_uuid=$(cat /proc/sys/kernel/random/uuid)
    local user=(--reuid "$1" --regid "$(id -g "$1")" --clear-groups)
    setpriv "${user[@]}" -- qemu-system-x86_64 -name "pkgtest-vm,debug-threads=on" -uuid "$vm_uuid" \
        -accel "$2" -m 32 -smp 1 -S -nodefaults -no-user-config -display none >"$work/qemu.log" 2>&1 &
    pids+=($!)
    vm_pid=${pids[-1]}
    local thread="CPU 0/${2^^}"
    for _ in $(seq 50); do
        grep -qx "$thread" /proc/"$vm_pid"/task/*/comm 2>/dev/null && return 0
        kill -0 "$vm_pid" 2>/dev/null || break
        sleep 0.2
    done
    stop "$vm_pid"
    unset 'pids[-1]'
    return 1
}
if [ -c /dev/kvm ] && start_vm root kvm; then
    vm_kvm=true
else
    start_vm nobody tcg || fail "qemu-system-x86_64 does not start: $(cat "$work/qemu.log")"
    vm_kvm=false
fi
say "a paused QEMU VM run by $(stat -c %U /proc/"$vm_pid"), uses_kvm=$vm_kvm"

mapfile -t unit_environment < <(unit_env tickscope-agent /etc/tickscope/agent.env)
# What `once` says about the VM: "missing" when it did not find it, else "kvm=true|false|unknown
# fds=readable|unreadable": whether it runs on KVM (from its descriptors, or its vCPU threads'
# names), and whether the agent reported the `vm_fds` blind spot (descriptors it cannot read).
vm_seen_with() { # caps
    as_user tickscope-agent "$1" /usr/bin/tickscope-agent once --interval 1 --host-name "$TEST_HOST" \
        >"$work/once.json" 2>>"$work/agent-once.log" || fail "tickscope-agent once failed with capabilities '${1:-none}'"
    python3 -c '
import json, sys
uuid = sys.argv[1]
report = json.load(open(sys.argv[2]))
vms = [g for g in report["guests"] if g.get("uuid") == uuid]
blind = any(b["check"] == "vm_fds" for b in report["host"].get("blind_spots", []))
if not vms:
    print("missing")
else:
    kvm = str(vms[0]["uses_kvm"]).lower() if "uses_kvm" in vms[0] else "unknown"
    print("kvm=" + kvm + " fds=" + ("unreadable" if blind else "readable"))
' "$vm_uuid" "$work/once.json"
}
seen=$(vm_seen_with "$unit_caps")
[ "$seen" = "kvm=$vm_kvm fds=readable" ] || fail "with the unit's capabilities ($unit_caps) the agent says $seen of the VM, expected kvm=$vm_kvm fds=readable"
say "agent with $unit_caps: $seen"
# Each capability alone, and none: the descriptors cannot be read, and the agent says so (the
# vm_fds blind spot). CAP_DAC_READ_SEARCH alone lists them but cannot read where they lead.
for caps in "" "+sys_ptrace" "+dac_read_search"; do
    seen=$(vm_seen_with "$caps")
    case "$seen" in
        *fds=unreadable | missing) ;;
        *) fail "with capabilities '${caps:-none}' the agent says $seen of the VM: the unit would hold a capability it does not need" ;;
    esac
    say "agent with ${caps:-no capabilities}: $seen"
done

# --- The agent reporting to the server, as its unit runs it -------------------------------------
cat >>/etc/tickscope/agent.env <<EOF
TICKSCOPE_SERVER=$base
TICKSCOPE_TOKEN=$agent_token
TICKSCOPE_HOST_NAME=$TEST_HOST
TICKSCOPE_INTERVAL=1
EOF
mapfile -t unit_environment < <(unit_env tickscope-agent /etc/tickscope/agent.env)
trace_to=$work/agent.strace as_user tickscope-agent "$unit_caps" /usr/bin/tickscope-agent run >"$work/agent.log" 2>&1 &
pids+=($!)
agent_pid=${pids[-1]}
reported=
for _ in $(seq 60); do
    if curl -fsS -H "Authorization: Bearer $viewer_token" "$base/api/v1/guests" >"$work/guests.json" 2>/dev/null &&
        python3 -c '
import json, sys
guests = json.load(open(sys.argv[1]))["guests"]
sys.exit(not any(g["uuid"] == sys.argv[2] and g["host"] == sys.argv[3] and g["uses_kvm"] == (sys.argv[4] == "true") for g in guests))
' "$work/guests.json" "$vm_uuid" "$TEST_HOST" "$vm_kvm"; then
        reported=yes
        break
    fi
    kill -0 "$agent_pid" 2>/dev/null || fail "the installed agent stopped"
    sleep 0.5
done
[ -n "$reported" ] || fail "the server never listed the VM from $TEST_HOST"
curl -fsS -H "Authorization: Bearer $viewer_token" "$base/api/v1/hosts" |
    python3 -c 'import json, sys; sys.exit(not any(h["host"] == sys.argv[1] for h in json.load(sys.stdin)["hosts"]))' "$TEST_HOST" ||
    fail "GET /api/v1/hosts does not list $TEST_HOST"
check_mode /var/lib/tickscope-agent/spool "700 tickscope-agent tickscope-agent"
say "the installed agent's report reached the installed server"

# --- The agent rolled out with Ansible (contrib/ansible) ---------------------------------------
# As an admin enrols a host: a token per host from a hosts file, then the collection's rollout
# role installs the .deb, writes agent.env with the host's own token, and checks that the host's
# first report arrived. No systemd runs here: the role leaves the unit alone
# (tickscope_agent_service=false), and the agent is started by hand as its unit would, between
# the role's install and its check (tag tickscope_agent_verify). A host without a token is refused before anything is installed.
ROLLOUT_HOST=pkgtest-rollout
stop "$agent_pid"
remaining=()
for pid in "${pids[@]}"; do
    [ "$pid" = "$agent_pid" ] || remaining+=("$pid")
done
pids=("${remaining[@]}")
dpkg_ -P tickscope-agent >"$work/dpkg-purge-agent.log"
[ ! -e /usr/bin/tickscope-agent ] || fail "/usr/bin/tickscope-agent is left after dpkg -P"
# Where the role copies the package: gone, as on a host it never ran on.
rm -f /var/cache/tickscope-agent.deb
ansible_dir=$work/ansible
mkdir -m 700 "$ansible_dir"
chown tickscope "$ansible_dir"
printf '# the hosts to enrol\n%s\n' "$ROLLOUT_HOST" >"$ansible_dir/hosts.txt"
mapfile -t unit_environment < <(unit_env tickscope-server /etc/tickscope/server.env)
as_user tickscope "" /usr/bin/tickscope-server token add rollout --role agent \
    --hosts-file "$ansible_dir/hosts.txt" --output "$ansible_dir/tokens.yml" 2>"$work/token-hosts-file.log" ||
    fail "token add --hosts-file: $(cat "$work/token-hosts-file.log")"
check_mode "$ansible_dir/tokens.yml" "600 tickscope tickscope"
rollout_token=$(sed -n "s/^  \"$ROLLOUT_HOST\": \"\(.*\)\"$/\1/p" "$ansible_dir/tokens.yml")
[ -n "$rollout_token" ] || fail "tokens.yml has no token for $ROLLOUT_HOST"
printf '%s\n' "all:" "  vars:" "    ansible_connection: local" \
    "    ansible_python_interpreter: /usr/bin/python3" "    ansible_become: false" \
    "  children:" "    tickscope_hypervisors:" "      hosts:" "        $ROLLOUT_HOST: {}" \
    "        pkgtest-notoken: {}" >"$ansible_dir/inventory.yml"
ansible-galaxy collection install --no-deps -p "$ansible_dir/collections" contrib/ansible >/dev/null
rollout() { # log name, ansible-playbook arguments...
    local log=$work/ansible-$1.log rc=0
    shift
    ANSIBLE_COLLECTIONS_PATH=$ansible_dir/collections:/usr/lib/python3/dist-packages ANSIBLE_NOCOLOR=1 \
        ansible-playbook -i "$ansible_dir/inventory.yml" tickscope.fleet.rollout_agent \
        -e "@$ansible_dir/tokens.yml" -e "tickscope_server_url=$base" \
        -e "tickscope_viewer_token=$viewer_token" -e "tickscope_agent_deb=$(realpath "$agent_deb")" "$@" >"$log" 2>&1 || rc=$?
    ! grep -qF -e "$rollout_token" -e "$viewer_token" "$log" || fail "a token is in Ansible's output ($log)"
    return $rc
}
if rollout notoken --limit pkgtest-notoken; then
    fail "the rollout went on for a host without a token"
fi
grep -q 'No agent token for host .*pkgtest-notoken' "$work/ansible-notoken.log" ||
    fail "the rollout did not say why it refused pkgtest-notoken: $(tail -n 20 "$work/ansible-notoken.log")"
[ ! -e /usr/bin/tickscope-agent ] || fail "the rollout installed the agent for a host without a token"
# --check first, as docs/ansible.md says: on a host without the package it says what it would
# do and installs nothing.
rollout check --check --limit "$ROLLOUT_HOST" -e tickscope_agent_service=false --skip-tags tickscope_agent_verify ||
    fail "the rollout role failed in --check: $(tail -n 30 "$work/ansible-check.log")"
[ ! -e /usr/bin/tickscope-agent ] || fail "the rollout role installed the agent in --check"
rollout install -v --limit "$ROLLOUT_HOST" -e tickscope_agent_service=false --skip-tags tickscope_agent_verify ||
    fail "the rollout role failed: $(tail -n 30 "$work/ansible-install.log")"
[ -x /usr/bin/tickscope-agent ] || fail "the rollout role did not install the agent"
check_mode /etc/tickscope/agent.env "640 root tickscope-agent"
grep -qx "TICKSCOPE_TOKEN=$rollout_token" /etc/tickscope/agent.env || fail "agent.env lacks the host's token"
grep -qx "TICKSCOPE_HOST_NAME=$ROLLOUT_HOST" /etc/tickscope/agent.env || fail "agent.env lacks the host's name"
mapfile -t unit_environment < <(unit_env tickscope-agent /etc/tickscope/agent.env)
as_user tickscope-agent "$unit_caps" /usr/bin/tickscope-agent run >"$work/agent-rollout.log" 2>&1 &
pids+=($!)
rollout verify --limit "$ROLLOUT_HOST" -e tickscope_agent_service=false --tags tickscope_agent_verify ||
    fail "the rollout role did not see the first report: $(tail -n 30 "$work/ansible-verify.log")"
say "the rollout role installed the agent with its own token, and its first report arrived"

for pid in "${pids[@]}"; do
    stop "$pid"
done
pids=()
check_syscalls tickscope-server "$work/server.strace" /usr/bin/tickscope-server
check_syscalls tickscope-agent "$work/agent.strace" /usr/bin/tickscope-agent

# --- Remove, then purge -------------------------------------------------------------------------
dpkg_ -r tickscope-agent tickscope-server >"$work/dpkg-remove.log"
for file in /usr/bin/tickscope-server /usr/bin/tickscope-agent "$UNITS/tickscope-server.service" "$UNITS/tickscope-agent.service"; do
    [ ! -e "$file" ] || fail "$file is left after dpkg -r"
done
# Removing keeps the settings and the data.
for file in /etc/tickscope/server.env /etc/tickscope/agent.env /var/lib/tickscope/tickscope.db; do
    [ -e "$file" ] || fail "$file is gone after dpkg -r (only purge deletes it)"
done
dpkg_ -P tickscope-agent tickscope-server >"$work/dpkg-purge.log"
left=$(ls -d /etc/tickscope /var/lib/tickscope /var/lib/tickscope-agent /etc/systemd/system/tickscope-* \
    /etc/systemd/system/*/tickscope-* /var/lib/systemd/deb-systemd-helper-*/tickscope-* \
    /var/lib/systemd/deb-systemd-helper-*/*/tickscope-* /usr/share/doc/tickscope-* \
    /usr/bin/tickscope-* "$UNITS"/tickscope-* 2>/dev/null || true)
[ -z "$left" ] || fail "left behind after dpkg -P: $left"
! dpkg-statoverride --list | grep -q tickscope || fail "a dpkg-statoverride is left after dpkg -P"
# Purging keeps the system users, as Debian's packages do (README, "Removing").
for user in tickscope tickscope-agent; do
    getent passwd "$user" >/dev/null || fail "purge deleted the user $user"
done
say "install, run, remove and purge: all clean ($((SECONDS - started)) s)"
