#!/usr/bin/env bash
# Builds the initramfs the libvirt test boots: busybox, the virtio modules that
# scripts/libvirt-assets.sh kept (virtio_pci, virtio_console and their dependencies), Debian's
# real qemu-guest-agent (/usr/sbin/qemu-ga, with the shared libraries and loader ldd names) and
# the guest probe (the given tickscope-agent binary, likewise), plus the kernel's build config
# under /boot and an /etc/os-release, as a distribution would have them.
# Usage: scripts/libvirt-initramfs.sh AGENT_BINARY OUTPUT.gz
#
# Its init loads the modules, names the virtio-serial ports under /dev/virtio-ports/ as udev
# would (from /sys/class/virtio-ports/*/name), starts qemu-ga on org.qemu.guest_agent.0 and the
# probe on org.tickscope.probe.0 (every 2 s), whichever of the two ports the domain has, then
# prints "tickscope-guest: booted: <cmdline>" on the console.
set -euo pipefail
agent=$1 out=$2
top=$(cd "$(dirname "$0")/.." && pwd)
assets=${TICKSCOPE_LIBVIRT_DIR:-$top/.cache/libvirt}
[ -s "$assets/modules/order" ] || { echo "libvirt-initramfs: run scripts/libvirt-assets.sh first" >&2; exit 1; }
[ -x /usr/sbin/qemu-ga ] || { echo "libvirt-initramfs: apt-get install qemu-guest-agent" >&2; exit 1; }
release=$(sed 's/^linux-image-//' "$assets/kernel.package")

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,proc,sys,dev,etc,boot,run,var,lib/modules,usr/sbin,usr/local/bin}
ln -s ../run "$root/var/run"
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount sleep cat echo mkdir ln insmod basename ls; do
    ln -s busybox "$root/bin/$applet"
done
cp "$assets"/modules/*.ko "$assets/modules/order" "$root/lib/modules/"

# Both programs are linked against this machine's libraries: bring exactly what ldd names.
copy_with_libraries() { # BINARY DESTINATION
    cp "$1" "$root$2"
    strip --strip-debug "$root$2" 2>/dev/null || true # a debug build boots faster without it
    ldd "$1" | grep -o '/[^ ]*' | while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
}
copy_with_libraries /usr/sbin/qemu-ga /usr/sbin/qemu-ga
copy_with_libraries "$agent" /usr/local/bin/tickscope-agent

cp "$assets/kernel.config" "$root/boot/config-$release"
printf 'ID=tickscope-test\nVERSION_ID=1\nNAME="tickscope test"\nPRETTY_NAME="tickscope test initramfs"\n' > "$root/etc/os-release"
cat > "$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || echo "tickscope-guest: insmod $m failed"; done
# No udev: name the ports as its rules would. They appear once virtio_console has probed.
mkdir -p /dev/virtio-ports
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -e /sys/class/virtio-ports ] && [ -n "$(ls /sys/class/virtio-ports)" ] && break
    sleep 1
done
for port in /sys/class/virtio-ports/*; do
    [ -r "$port/name" ] || continue
    ln -sf "../$(basename "$port")" "/dev/virtio-ports/$(cat "$port/name")"
done
echo "tickscope-guest: ports:" $(ls /dev/virtio-ports)
qga=/dev/virtio-ports/org.qemu.guest_agent.0
if [ -e $qga ]; then
    /usr/sbin/qemu-ga --method virtio-serial --path $qga --pidfile /run/qemu-ga.pid &
fi
probe=/dev/virtio-ports/org.tickscope.probe.0
if [ -e $probe ]; then
    /usr/local/bin/tickscope-agent guest --channel $probe --interval 2 --measure 1 &
fi
echo "tickscope-guest: booted: $(cat /proc/cmdline)"
while true; do sleep 3600; done
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out"
