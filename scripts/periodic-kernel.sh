#!/usr/bin/env bash
# Builds the periodic test guest's kernel: Debian's linux-source-6.1 with `make tinyconfig` plus
# scripts/periodic-kernel.config (CONFIG_HZ_PERIODIC=y, CONFIG_HZ_1000=y, and only what the test
# guests need). A kernel built without NO_HZ, which no boot parameter makes tickless, for the
# real-guest tests (server/tests/suite/real_guests.rs).
# Cached under $TICKSCOPE_PERIODIC_KERNEL_DIR (default ~/.cache/tickscope/periodic-kernel, outside
# the checkout so that a fresh clone does not build it again)/<hash of the fragment's settings
# and the source package's version>: built again only when either changes. Prints that
# directory on stdout; it holds bzImage, config (the full .config), release (uname -r), build.log
# and build-seconds.
# Needs: linux-source-6.1, build-essential, bc, flex, bison, libelf-dev, xz-utils (scripts/test.sh
# installs them). A fresh build takes about 4 minutes on this project's 2-core machine (3.6 when
# quiet, 10 on disk while other builds ran: docs/calibration.md); it prints how long it took.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
fragment=$top/scripts/periodic-kernel.config
base=${TICKSCOPE_PERIODIC_KERNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tickscope/periodic-kernel}
source_tar=/usr/src/linux-source-6.1.tar.xz
# Keyed by the fragment's settings and the source's version: a comment edited does not rebuild
# the kernel, a new linux-source-6.1 does.
source_version=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || echo unknown)
hash=$({ grep -E '^(CONFIG_|# CONFIG_[A-Za-z0-9_]+ is not set)' "$fragment"; echo "$source_version"; } |
    sha256sum | cut -c1-16)
out=$base/$hash

if [ -s "$out/bzImage" ] && [ -s "$out/config" ] && [ -s "$out/release" ]; then
    echo "$out"
    exit 0
fi
[ -s "$source_tar" ] || {
    echo "periodic-kernel: $source_tar missing (apt-get install linux-source-6.1)" >&2
    exit 1
}

mkdir -p "$base"
# The tree, some 1.5 GB unpacked and built, goes to a tmpfs when one has room: on the development
# machine, deleting it from disk took 2.5 minutes, half as long as compiling it.
scratch=$base
if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')" -gt $((4 * 1024 * 1024)) ]; then
    scratch=/dev/shm
fi
work=$(mktemp -d "$scratch/tickscope-periodic-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
echo "periodic-kernel: building $(basename "$source_tar") with $(basename "$fragment") ($hash) in $work" >&2
tar -xJf "$source_tar" -C "$work"
src=$(echo "$work"/linux-source-*)
log=$work/build.log
{
    make -C "$src" ARCH=x86_64 tinyconfig
    "$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$fragment"
    make -C "$src" ARCH=x86_64 olddefconfig
} > "$log" 2>&1 || { tail -50 "$log" >&2; exit 1; }

# Kconfig drops what a dependency forbids without failing: every line of the fragment must have
# come through, or the kernel is not the one this script promises.
wrong=0
while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
        grep -qxF "$line" "$src/.config" || {
            echo "periodic-kernel: wanted $line, got: $(grep -E "^(# )?${BASH_REMATCH[1]}[= ]" "$src/.config" || echo nothing)" >&2
            wrong=1
        }
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
        if grep -qE "^${BASH_REMATCH[1]}=" "$src/.config"; then
            echo "periodic-kernel: wanted $line, got: $(grep -E "^${BASH_REMATCH[1]}=" "$src/.config")" >&2
            wrong=1
        fi
    fi
done < "$fragment"
[ "$wrong" -eq 0 ] || exit 1

make -C "$src" ARCH=x86_64 -j"$(nproc)" bzImage >> "$log" 2>&1 || { tail -50 "$log" >&2; exit 1; }
elapsed=$(( $(date +%s) - started ))

staged=$work/out
mkdir -p "$staged"
cp "$src/arch/x86/boot/bzImage" "$staged/bzImage"
cp "$src/.config" "$staged/config"
make -C "$src" -s ARCH=x86_64 kernelrelease > "$staged/release"
cp "$log" "$staged/build.log"
echo "$elapsed" > "$staged/build-seconds"
rm -rf "$out"
mv "$staged" "$out"
echo "periodic-kernel: built $(cat "$out/release") in ${elapsed} s (unpacking the source included)" >&2
echo "$out"
