#!/usr/bin/env bash
# Prepares what the real-guest tests boot: a Debian cloud kernel (vmlinuz, unpacked from the
# package with dpkg -x, never installed on this host) and a busybox initramfs whose init just
# idles. Cached under $TICKSCOPE_GUEST_DIR (default .cache/guest); safe to run again.
# Prints the directory on stdout. Needs: apt-get, dpkg, busybox-static, cpio, gzip.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${TICKSCOPE_GUEST_DIR:-$top/.cache/guest}
mkdir -p "$dir"
cd "$dir"

if [ ! -s vmlinuz ]; then
    # The meta-package names the current cloud kernel; take whatever it depends on today.
    find_kernel() {
        apt-cache depends linux-image-cloud-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9].*-cloud-amd64/ {print $2; exit}'
    }
    pkg=$(find_kernel)
    if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq >&2 # a fresh machine may have no package lists yet
        pkg=$(find_kernel)
    fi
    if [ -z "$pkg" ]; then
        echo "guest-assets: cannot find a linux-image-*-cloud-amd64 package (run apt-get update?)" >&2
        exit 1
    fi
    rm -rf pkg ./*.deb
    apt-get download "$pkg" >&2
    dpkg -x ./*.deb pkg
    cp pkg/boot/vmlinuz-* vmlinuz
    cp pkg/boot/config-* kernel.config
    echo "$pkg" > kernel.package
    rm -rf pkg ./*.deb
fi

if [ ! -s initramfs.gz ]; then
    bb=/bin/busybox # from busybox-static: the initramfs has no libc to link against
    [ -x "$bb" ] || { echo "guest-assets: $bb missing (apt-get install busybox-static)" >&2; exit 1; }
    root=$(mktemp -d)
    mkdir -p "$root"/{bin,proc,sys,dev}
    cp "$bb" "$root/bin/busybox"
    for applet in sh mount sleep cat echo; do ln -s busybox "$root/bin/$applet"; done
    cat > "$root/init" <<'INIT'
#!/bin/sh
# An idle guest: mount /proc, say that boot finished (the tests wait for this line), then sleep.
mount -t proc proc /proc
mount -t sysfs sys /sys
echo "tickscope-guest: booted: $(cat /proc/cmdline)"
while true; do sleep 3600; done
INIT
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -9) > initramfs.gz.tmp
    mv initramfs.gz.tmp initramfs.gz
    rm -rf "$root"
fi

echo "$dir"
