#!/usr/bin/env bash
# Builds an initramfs whose init runs the guest probe: the busybox of guest-assets.sh, the given
# tickscope-agent binary with the shared libraries ldd names, and the kernel's build config under
# /boot, so the probe finds what it would find on a real distribution.
# Usage: scripts/probe-initramfs.sh AGENT_BINARY OUTPUT.gz [--without-kernel-config]
# The guest's second serial port (ttyS1) is the probe's channel; its init reports every 5 s.
# --without-kernel-config: the probe finds no build config, as in a guest whose kernel has no
# /proc/config.gz and no /boot/config-*: /boot is left empty, and init mounts a file that is not
# gzip over /proc/config.gz (a kernel built with IKCONFIG_PROC cannot be made to lack it).
set -euo pipefail
agent=$1 out=$2 without_config=${3:-}
case $without_config in
    "" | --without-kernel-config) ;;
    *) echo "probe-initramfs: unknown option $without_config" >&2; exit 1 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
assets=${TICKSCOPE_GUEST_DIR:-$top/.cache/guest}
[ -s "$assets/kernel.config" ] || { echo "probe-initramfs: run scripts/guest-assets.sh first" >&2; exit 1; }
release=$(sed 's/^linux-image-//' "$assets/kernel.package")

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,proc,sys,dev,etc,boot,usr/local/bin}
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount sleep cat echo mkdir; do ln -s busybox "$root/bin/$applet"; done
cp "$agent" "$root/usr/local/bin/tickscope-agent"
# A debug build is mostly debug info: the guest boots faster without it.
strip --strip-debug "$root/usr/local/bin/tickscope-agent" 2>/dev/null || true
# The agent is linked against the build machine's glibc: bring exactly what ldd names.
ldd "$agent" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
if [ -z "$without_config" ]; then
    cp "$assets/kernel.config" "$root/boot/config-$release"
else
    echo "no kernel build config in this guest" > "$root/etc/tickscope-no-kernel-config"
fi
printf 'ID=tickscope-test\nVERSION_ID=1\nPRETTY_NAME="tickscope test initramfs"\n' > "$root/etc/os-release"
cat > "$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
if [ -f /etc/tickscope-no-kernel-config ] && [ -e /proc/config.gz ]; then
    mount -o bind /etc/tickscope-no-kernel-config /proc/config.gz
fi
echo "tickscope-guest: booted: $(cat /proc/cmdline)"
/usr/local/bin/tickscope-agent guest --channel /dev/ttyS1 --interval 5 --measure 1 &
while true; do sleep 3600; done
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out"
