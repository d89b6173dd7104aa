#!/usr/bin/env bash
# A Debian guest's root filesystem in a directory, for the boot-parameter playbook to change
# through Ansible's chroot connection (server/tests/suite/ansible.rs): Debian 12's minimal base
# with python3 (what Ansible's modules need), made by debootstrap from the Debian mirror this
# machine uses. Cached under $TICKSCOPE_ANSIBLE_ROOT (default .cache/ansible-root); safe to run
# again. Prints the root's path on stdout. Root only (debootstrap).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${TICKSCOPE_ANSIBLE_ROOT:-$top/.cache/ansible-root}
root=$dir/rootfs
if [ ! -x "$root/usr/bin/python3" ]; then
    command -v debootstrap >/dev/null || {
        echo "ansible-root: debootstrap is missing (apt-get install debootstrap)" >&2
        exit 1
    }
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
    mirror=${mirror:-$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}
    mirror=${mirror:-http://deb.debian.org/debian}
    rm -rf "$dir"
    mkdir -p "$dir"
    debootstrap --variant=minbase --include=python3 bookworm "$root.partial" "$mirror" >"$dir/debootstrap.log" 2>&1 || {
        tail -n 20 "$dir/debootstrap.log" >&2
        exit 1
    }
    mv "$root.partial" "$root"
fi
echo "$root"
