#!/usr/bin/env bash
# Check the packages `make kernel-deb-build` made, without installing them:
# they are unpacked under a temporary folder (removed afterwards) and
#
#   - the image package holds /boot/vmlinuz-<release> (a bzImage), its config
#     and System.map, and its config builds every TCP_CONG_* algorithm (y or
#     m), ours as modules, netem, Open vSwitch;
#   - our modules are in the image, for this release (vermagic), with their
#     parameters, and every module of the package resolves its symbols
#     against the kernel and the other modules (depmod -e against
#     System.map);
#   - the headers package builds our modules out of tree (kernel/Makefile,
#     as DKMS would on the VM) for the same release, without warnings.
#
#   kernel/deb/check-debs.sh [DIR]   DIR: where the packages are (default:
#                                    build-deb.sh --path, the current inputs')
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"   # kernel/
unset TORTOISE_VM_KERNEL_VERSION
# shellcheck source=vars.sh
source "$here/deb/vars.sh"
rel="$LAB_RELEASE"

log() { echo "check-debs: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
# a module must be built for this release: its vermagic's first word
expect_release() {
  local vm
  vm="$(modinfo -F vermagic "$1" | cut -d' ' -f1)"
  [ "$vm" = "$rel" ] || die "$2: vermagic $vm, expected $rel"
}

dir="${1:-$(bash "$here/deb/build-deb.sh" --path)}"
[ -d "$dir" ] || die "no folder $dir: build the packages first (make kernel-deb-build)"
image="$(ls "$dir"/linux-image-"$rel"_*.deb 2>/dev/null | head -1 || true)"
headers="$(ls "$dir"/linux-headers-"$rel"_*.deb 2>/dev/null | head -1 || true)"
[ -n "$image" ] && [ -n "$headers" ] \
  || die "no linux-image-$rel / linux-headers-$rel packages in $dir: build them first (make kernel-deb-build)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/tortoise-check-debs-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

for deb in "$image" "$headers"; do
  name="$(dpkg-deb -f "$deb" Package)"; arch="$(dpkg-deb -f "$deb" Architecture)"
  [ "$arch" = amd64 ] || die "$(basename "$deb"): architecture $arch, expected amd64"
  log "$name $(dpkg-deb -f "$deb" Version): $(du -k "$deb" | cut -f1) KiB packed, $(dpkg-deb -f "$deb" Installed-Size) KiB installed"
done

# -- the image -------------------------------------------------------------
root="$tmp/image"
dpkg-deb -x "$image" "$root"
[ -s "$root/boot/vmlinuz-$rel" ] || die "image lacks /boot/vmlinuz-$rel"
file -b "$root/boot/vmlinuz-$rel" | grep -q "Linux kernel x86 boot executable bzImage" \
  || die "/boot/vmlinuz-$rel is not a bzImage: $(file -b "$root/boot/vmlinuz-$rel")"
config="$root/boot/config-$rel"
[ -f "$config" ] && [ -f "$root/boot/System.map-$rel" ] || die "image lacks /boot/config-$rel or System.map-$rel"
mods="$root/lib/modules/$rel"
[ -d "$mods/kernel" ] || mods="$root/usr/lib/modules/$rel"   # where kmod says modules go
[ -d "$mods/kernel" ] || die "image lacks /lib/modules/$rel/kernel"

algs=()
for sym in $(grep -o '^CONFIG_TCP_CONG_[A-Z0-9_]*=[ym]' "$config" | grep -v ADVANCED); do algs+=("$sym"); done
for want in CONFIG_TCP_CONG_CUBIC_PLUS=m CONFIG_TCP_CONG_RENO_BETA=m CONFIG_NET_SCH_NETEM=y CONFIG_OPENVSWITCH=m; do
  grep -qx "$want" "$config" || die "config: $want does not hold"
done
for m in $(cd "$here/modules" && ls tcp_*.c | sed 's/\.c$//'); do
  ko="$(find "$mods/kernel" -name "$m.ko*" | head -1)"
  [ -n "$ko" ] || die "image lacks $m.ko"
  expect_release "$ko" "$m"
  parms="$(modinfo -F parm "$ko" | cut -d: -f1 | tr '\n' ' ')"
  [ -n "$parms" ] || die "$m: no module parameters"
  log "$m: ${ko#"$root"}, vermagic $rel, parameters: $parms"
done
[ -n "$(find "$mods/kernel/net/openvswitch" -name 'openvswitch.ko*' 2>/dev/null)" ] || die "image lacks openvswitch.ko"
nko="$(find "$mods/kernel" -name '*.ko*' | wc -l)"
unresolved="$(depmod -b "${mods%/lib/modules/"$rel"}" -e -F "$root/boot/System.map-$rel" "$rel" 2>&1 || true)"
[ -z "$unresolved" ] || die "depmod -e: $(echo "$unresolved" | head -5)"
log "image: bzImage $(du -k "$root/boot/vmlinuz-$rel" | cut -f1) KiB, $nko modules, all symbols resolve (depmod -e)"

# -- the headers -----------------------------------------------------------
hroot="$tmp/headers"
dpkg-deb -x "$headers" "$hroot"
kdir="$hroot/usr/src/linux-headers-$rel"
# 6.12's headers package carries the build's auto.conf, not .config
auto="$kdir/include/config/auto.conf"
[ -f "$auto" ] && [ -f "$kdir/Module.symvers" ] || die "headers lack include/config/auto.conf or Module.symvers ($kdir)"
for sym in $(grep -o '^CONFIG_TCP_CONG_[A-Z0-9_]*=[ym]' "$config") CONFIG_NET_SCH_NETEM=y; do
  grep -qx "$sym" "$auto" || die "the headers' auto.conf lacks $sym (the image's config has it)"
done
log "algorithms (${#algs[@]}): $(printf '%s\n' "${algs[@]}" | sed 's/CONFIG_TCP_CONG_//' | tr '\n' ' ')"

build="$tmp/modules"
blog="$tmp/modules.log"
make -C "$here" modules KDIR="$kdir" BUILD="$build" > "$blog" 2>&1 || { cat "$blog" >&2; die "our modules did not build against the headers package"; }
if grep -qi "warning" "$blog"; then cat "$blog" >&2; die "building against the headers package printed warnings"; fi
for ko in "$build"/*.ko; do expect_release "$ko" "$(basename "$ko") built against the headers"; done
log "headers: our modules build out of tree against them ($(cd "$build" && ls -- *.ko | tr '\n' ' '))"
log "ok: $(basename "$image") $(basename "$headers")"
