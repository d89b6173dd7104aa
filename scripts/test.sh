#!/usr/bin/env bash
# Runs every test, including the real-guest end-to-end test, on a fresh Debian machine.
# Installs what the tests need (Debian packages, so it must run as root or with sudo), prepares
# the guest kernels and initramfs (cached in .cache/guest, ~/.cache/tickscope/periodic-kernel and
# .cache/libvirt), then runs the whole test suite, schemathesis against the API's OpenAPI document
# (installed from PyPI into .cache) and the Debian packages' test. The libvirt and disk-full tests
# need root themselves.
# `cargo test` alone runs the fast tests and skips (marks ignored) the real-guest one.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each part's time, and how busy the machine's CPUs were meanwhile, so that a slow run says where
# it went and which parts leave CPU idle (CI has a budget: docs/testing.md).
started=$SECONDS
mark=$SECONDS
cpu_ticks() { # busy and total clock ticks of all CPUs since boot (/proc/stat: user to steal;
    # the guest fields after them are counted in user and nice already)
    awk '/^cpu / { total = 0; for (i = 2; i <= 9; i++) total += $i; print total - $5 - $6, total }' /proc/stat
}
read -r busy_mark total_mark < <(cpu_ticks)
took() {
    local busy total
    read -r busy total < <(cpu_ticks)
    echo "test.sh: $1: $((SECONDS - mark)) s, CPUs $(( (busy - busy_mark) * 100 / (total - total_mark + 1) )) % busy ($((SECONDS - started)) s so far)" >&2
    mark=$SECONDS
    busy_mark=$busy
    total_mark=$total
}

# chromium and chromium-driver: the browser tests (server/tests/suite/browser.rs).
# python3-venv and curl: schemathesis against the OpenAPI document (scripts/schemathesis.sh).
# systemd (systemd-analyze), adduser and strace: the Debian packages' test (scripts/packages.sh).
# libvirt-daemon-system, libvirt-clients, qemu-guest-agent, dbus and kmod: the libvirt test
# (server/tests/suite/libvirt.rs, scripts/libvirt-assets.sh); setpriv comes with util-linux.
# prometheus (Prometheus and promtool 2.42): server/tests/suite/prometheus.rs checks /metrics and
# contrib/prometheus/ with promtool and runs a real Prometheus against the demo.
# linux-source-6.1 and the kernel's build tools: the periodic guest kernel
# (scripts/periodic-kernel.sh).
# prometheus-alertmanager: the real Alertmanager tickscope sends alerts to
# (server/tests/suite/alertmanager.rs).
# ansible-core, python3-yaml and poppler-utils: the export tests read the plan's inventory with
# ansible-inventory and PyYAML and the printed demo plan with pdftotext (server/tests/suite/exports.rs).
# ansible (its community.general collection), ansible-lint, python3-lxml, debootstrap and python3-apt:
# contrib/ansible, linted (scripts/ansible-lint.sh), run against a libvirt domain
# (server/tests/suite/libvirt.rs) and a Debian root filesystem (server/tests/suite/ansible.rs,
# scripts/ansible-root.sh), and its agent rollout against the installed .deb (scripts/packages.sh).
# postgresql (15): the suite runs a second time on PostgreSQL, on a throwaway cluster
# (scripts/postgres.sh).
# haproxy: a real load balancer speaking the PROXY protocol in front of the server
# (server/tests/suite/one_sender.rs).
packages=(qemu-system-x86 busybox-static cpio gzip chromium chromium-driver python3-venv curl
    systemd adduser strace libvirt-daemon-system libvirt-clients qemu-guest-agent dbus kmod
    linux-source-6.1 build-essential bc flex bison libelf-dev xz-utils
    prometheus-alertmanager prometheus ansible-core python3-yaml poppler-utils postgresql haproxy
    ansible ansible-lint python3-lxml debootstrap python3-apt)
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]}" >&2
    "${as_root[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The code's map holds (docs/architecture.md): no import circle, no child importing its parent,
# no module importing a higher layer. Layers lowest first, as the map lists them.
python3 scripts/module-cycles.py --self-test
python3 scripts/capacity.py --self-test
python3 scripts/hostile.py --self-test
python3 scripts/module-cycles.py server/src --layers "$(cat scripts/server-layers.txt)"
python3 scripts/module-cycles.py agent/src
python3 scripts/module-cycles.py wire/src
# The Ansible collection: ansible-lint (production profile) and every playbook's syntax.
scripts/ansible-lint.sh
took "packages checked, module layers, ansible-lint"

scripts/guest-assets.sh >/dev/null
# Starts libvirtd and what it needs, adds the agent's test user, keeps the virtio modules.
"${as_root[@]}" scripts/libvirt-assets.sh >/dev/null
# A Debian root filesystem for the boot-parameter playbook (debootstrap, cached).
"${as_root[@]}" scripts/ansible-root.sh >/dev/null
# A kernel built without NO_HZ for the real-guest tests: minutes the first time, then cached.
scripts/periodic-kernel.sh >/dev/null
took "guest kernels, libvirt, root filesystem"
# The real-guest test runs the agent binary, which belongs to another package of the workspace.
# (The server's binary is built with its test suite, which runs it: built here too, it would be
# built with the features of a build without dev-dependencies, so that its dependencies, tokio,
# sqlx and axum among them, were compiled twice, three minutes on two cores.)
cargo build -p tickscope-agent --bins
took "the agent's build"
# The server's integration tests are one binary (server/tests/suite): the tests that boot guests
# (its modules real_guests and libvirt) run apart from the rest and one at a time, so that no
# other test shares the machine with them. The skip applies to that binary only.
cargo test --workspace --exclude tickscope-server -- --include-ignored
cargo test -p tickscope-server --lib --bins -- --include-ignored
cargo test -p tickscope-server --doc
took "the builds and unit tests"
cargo test -p tickscope-server --test suite -- --include-ignored --test-threads=1 real_guests:: libvirt::
took "the real guests and libvirt"

# From here on nothing measures guests: the Debian packages' release build (about 9 minutes of
# both CPUs, with cargo-deb's own) runs in the background at the lowest priority (SCHED_IDLE),
# on the CPU the suites below leave idle while they wait on servers, PostgreSQL and browsers.
# Their own processes come first. scripts/packages.sh then finds the packages built.
packages_build_log=$(mktemp /tmp/tickscope-packages-build.XXXXXX)
# In a process group of its own (setsid), so that a failed run stops its cargo and rustc too.
# (-w: were setsid to fork, it would still end with the build, and `wait` see the build's status.)
setsid -w chrt --idle 0 nice -n 19 scripts/packages.sh --build >"$packages_build_log" 2>&1 &
packages_build=$!
pg_dir=
stop_background() {
    [ -z "$packages_build" ] || kill -- -"$packages_build" 2>/dev/null || true
    [ -z "$pg_dir" ] || { scripts/postgres.sh stop "$pg_dir" || true; rm -rf "$pg_dir"; }
    rm -f "$packages_build_log"
}
trap stop_background EXIT

cargo test -p tickscope-server --test suite -- --include-ignored --skip real_guests:: --skip libvirt::
took "the suite on SQLite"
# The same suite on PostgreSQL: each test makes a database of its own on a throwaway cluster
# (server/tests/suite/common/database.rs). The guest-booting tests measure guests, not storage:
# they run on SQLite only, as do the Ansible runs (their server is a process on SQLite).
pg_dir=$(mktemp -d /tmp/tickscope-pg.XXXXXX)
pg_url=$(scripts/postgres.sh start "$pg_dir")
TICKSCOPE_TEST_POSTGRES=$pg_url \
    cargo test -p tickscope-server --test suite -- --include-ignored --skip real_guests:: --skip libvirt:: --skip ansible::
took "the suite on PostgreSQL"
scripts/schemathesis.sh
took "schemathesis"
if ! wait "$packages_build"; then
    cat "$packages_build_log" >&2
    echo "test.sh: building the Debian packages failed (above)" >&2
    exit 1
fi
packages_build=
took "the rest of the packages' build"
scripts/packages.sh
took "the Debian packages"
