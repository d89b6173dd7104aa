#!/usr/bin/env bash
# Prepares the host for server/tests/suite/libvirt.rs; safe to run again. Needs root.
#
# - Starts what libvirt's system instance needs when nothing started it (no systemd here):
#   the D-Bus system bus (libvirtd asks polkit over it whether a non-root client may manage
#   domains), virtlogd (QEMU's log and console go through it) and libvirtd, with Debian's
#   default configuration. Under systemd it starts their units instead.
# - Adds the user the test runs the agent as, tickscope-agent-test, a system user in the groups
#   libvirt, kvm and libvirt-qemu (those that exist). Membership must be in the group database:
#   Debian's polkit rule for libvirt (60-libvirt.rules, subject.isInGroup("libvirt")) looks the
#   user's groups up there, and ignores a process's supplementary groups.
# - Keeps the guest kernel of scripts/guest-assets.sh (the same package) together with the
#   modules a guest needs for virtio-serial ports, taken from the same package, so vmlinuz and
#   modules always match. Cached under $TICKSCOPE_LIBVIRT_DIR (default .cache/libvirt).
#
# Prints the cache directory on stdout. The initramfs itself (qemu-guest-agent and the probe)
# is built from it by scripts/libvirt-initramfs.sh.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${TICKSCOPE_LIBVIRT_DIR:-$top/.cache/libvirt}
guest=$("$top/scripts/guest-assets.sh")
[ "$(id -u)" -eq 0 ] || { echo "libvirt-assets: run as root" >&2; exit 1; }
for tool in libvirtd virtlogd virsh dbus-daemon /usr/sbin/qemu-ga modinfo; do
    command -v "$tool" >/dev/null || {
        echo "libvirt-assets: $tool missing (apt-get install libvirt-daemon-system libvirt-clients qemu-guest-agent kmod)" >&2
        exit 1
    }
done

# A daemon started from a pid file is running while that pid is alive and is that program.
running() { # NAME PIDFILE
    local pid
    pid=$(cat "$2" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

# Without udev, /dev/kvm keeps the kernel's root-only 0600. libvirt then judges KVM usable or not
# inconsistently (it probed QEMU with KVM, then finds /dev/kvm closed to its QEMU user), takes
# its capability cache for stale on every lookup and probes QEMU again, ten times or so: each
# `virsh define` took about 50 s. Give it the group and mode Debian's udev rules give it.
if [ -c /dev/kvm ] && [ ! -d /run/udev ] && getent group kvm >/dev/null &&
    [ "$(stat -c %G /dev/kvm)" = root ]; then
    chgrp kvm /dev/kvm
    chmod 0660 /dev/kvm
fi

if [ -d /run/systemd/system ]; then
    for unit in dbus virtlogd libvirtd; do
        systemctl is-active --quiet "$unit" || systemctl start "$unit" >&2
    done
else
    bus_started=
    if [ ! -S /run/dbus/system_bus_socket ] || ! running dbus-daemon /run/dbus/pid; then
        mkdir -p /run/dbus
        rm -f /run/dbus/pid # a stale pid file stops dbus-daemon from starting
        dbus-daemon --system --fork
        bus_started=1
    fi
    running virtlogd /run/virtlogd.pid || virtlogd -d
    if running libvirtd /run/libvirtd.pid && [ -n "$bus_started" ]; then
        # A libvirtd started before the bus keeps failing every polkit check: start it again.
        kill "$(cat /run/libvirtd.pid)"
        for _ in $(seq 50); do running libvirtd /run/libvirtd.pid || break; sleep 0.2; done
    fi
    running libvirtd /run/libvirtd.pid || libvirtd -d
fi
# libvirtd takes a moment before it answers.
for _ in $(seq 50); do
    virsh -c qemu:///system version >/dev/null 2>&1 && break
    sleep 0.2
done
virsh -c qemu:///system version >/dev/null || { echo "libvirt-assets: libvirtd does not answer" >&2; exit 1; }

user=tickscope-agent-test
groups=()
for g in libvirt kvm libvirt-qemu; do getent group "$g" >/dev/null && groups+=("$g"); done
group_list=$(IFS=,; echo "${groups[*]}")
if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin \
        --groups "$group_list" "$user"
else
    usermod --append --groups "$group_list" "$user"
fi

mkdir -p "$dir"
cd "$dir"
package=$(cat "$guest/kernel.package")
if [ ! -s vmlinuz ] || [ ! -s kernel.package ] || [ "$(cat kernel.package)" != "$package" ]; then
    rm -rf pkg modules vmlinuz kernel.package ./*.deb
    apt-get download "$package" >&2
    dpkg -x ./*.deb pkg
    release=${package#linux-image-}
    kdir=pkg/lib/modules/$release/kernel
    # virtio_console and what it needs, dependencies first (modinfo reads each .ko's own list).
    mkdir -p modules
    load_order=()
    add_module() {
        local name=$1 file dep
        for done_name in "${load_order[@]}"; do [ "$done_name" = "$name" ] && return; done
        file=$(find "$kdir" -name "$name.ko*" -print -quit)
        [ -n "$file" ] || { echo "libvirt-assets: module $name not in $package" >&2; exit 1; }
        for dep in $(modinfo -F depends "$file" | tr ',' ' '); do add_module "$dep"; done
        case $file in
            *.ko) cp "$file" "modules/$name.ko" ;;
            *.ko.xz) xz -dc "$file" > "modules/$name.ko" ;; # busybox insmod takes plain .ko only
            *.ko.zst) zstd -qdc "$file" > "modules/$name.ko" ;;
            *.ko.gz) gzip -dc "$file" > "modules/$name.ko" ;;
        esac
        load_order+=("$name")
    }
    # virtio_pci: the virtio-serial controller is a PCI device; virtio_console: its ports.
    for m in virtio_pci virtio_console; do add_module "$m"; done
    printf '%s\n' "${load_order[@]}" > modules/order
    cp pkg/boot/vmlinuz-* vmlinuz
    cp pkg/boot/config-* kernel.config
    rm -rf pkg ./*.deb
    echo "$package" > kernel.package
fi

echo "$dir"
