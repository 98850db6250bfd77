#!/usr/bin/env bash
# Tortoise Lab VM: the kernel step (root), run by the Vagrantfile after
# `make setup`. Then the Vagrantfile reboots the VM and runs verify.sh.
#
#   provision-kernel.sh fast   (default) Debian's 6.12 kernel + headers from
#                              bookworm-security at the version pinned in
#                              kernel/DEBIAN_VERSION (TORTOISE_VM_KERNEL_VERSION
#                              overrides), our modules built and installed by
#                              DKMS (`make vm-modules`), rebuilt by DKMS for
#                              every later kernel
#   provision-kernel.sh full   `make kernel-deb`: our patched 6.12 kernel
#                              (kernel/lab.config over Debian's config, our
#                              modules in tree) built as Debian packages here
#                              and installed; hours on 2 vCPUs
#
# Both: every congestion control module and netem load at boot
# (/etc/modules-load.d/tortoiselab.conf), the chosen kernel becomes GRUB's
# default, and /etc/tortoiselab-kernel records the release verify.sh expects.
set -euo pipefail

mode="${1:-${TORTOISE_VM_KERNEL:-fast}}"
project="${TORTOISE_PROJECT:-/vagrant}"
# shellcheck source=../kernel/deb/vars.sh
source "$project/kernel/deb/vars.sh"
log() { echo "provision-kernel: $*"; }
die() { echo "provision-kernel: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root"
export DEBIAN_FRONTEND=noninteractive

# a target of kernel/deb/Makefile.inc, through the project's Makefile when it includes it
project_make() {
  if grep -q "kernel/deb/Makefile.inc" "$project/Makefile"; then
    make -C "$project" "$@"
  else
    make -C "$project" -f kernel/deb/Makefile.inc "$@"
  fi
}

apt_has() { [ -n "$(apt-cache madison "$1" 2>/dev/null | awk -v v="$2" '$3 == v')" ]; }

case "$mode" in
  fast)
    rel="$STOCK_RELEASE"
    if ! apt_has "$IMAGE_PKG" "$DEB_VERSION"; then apt-get update -q; fi
    apt_has "$IMAGE_PKG" "$DEB_VERSION" || die "$IMAGE_PKG=$DEB_VERSION is not in apt's sources \
(bookworm-security keeps only recent 6.12 builds): update kernel/DEBIAN_VERSION, or set \
TORTOISE_VM_KERNEL_VERSION to a version 'apt-cache madison linux-source-6.12' lists, and re-provision"
    log "installing Debian's $IMAGE_PKG and $HEADERS_PKG ($DEB_VERSION), dkms"
    apt-get install -y -q --no-install-recommends \
      "$IMAGE_PKG=$DEB_VERSION" "$HEADERS_PKG=$DEB_VERSION" dkms
    # our modules under DKMS for that kernel (and, by AUTOINSTALL, any later one)
    project_make vm-modules VM_KERNEL_RELEASE="$rel"
    ;;
  full)
    rel="$LAB_RELEASE"
    log "building and installing our patched kernel's packages (make kernel-deb)"
    project_make kernel-deb
    # our modules are in tree here: a DKMS copy from the fast path would shadow them
    if command -v dkms >/dev/null; then bash "$project/kernel/deb/dkms.sh" remove; fi
    ;;
  *)
    die "unknown kernel mode '$mode' (fast or full)"
    ;;
esac

[ -e "/boot/vmlinuz-$rel" ] || die "/boot/vmlinuz-$rel is missing"
install -m 0644 "$project/vagrant/modules-load.conf" /etc/modules-load.d/tortoiselab.conf
echo "$rel" > /etc/tortoiselab-kernel

# GRUB's default: that kernel, by its menu entry id (not by version order,
# which would not decide between 6.12.N+deb12-amd64 and 6.12.N-tortoise)
if [ -f /boot/grub/grub.cfg ] && command -v update-grub >/dev/null; then
  update-grub 2>/dev/null
  cfg=/boot/grub/grub.cfg
  sub="$(sed -n "s/^submenu .*\$menuentry_id_option '\(gnulinux-advanced-[^']*\)'.*/\1/p" "$cfg" | head -1)"
  entry="$(grep -F "'gnulinux-$rel-advanced-" "$cfg" | sed -n "s/.*\$menuentry_id_option '\(gnulinux-[^']*-advanced-[^']*\)'.*/\1/p" | head -1)"
  if [ -n "$entry" ]; then
    # inside the "Advanced options" submenu, unless GRUB_DISABLE_SUBMENU put it at the top
    if [ -n "$sub" ]; then entry="$sub>$entry"; fi
    mkdir -p /etc/default/grub.d
    echo "GRUB_DEFAULT=\"$entry\"" > /etc/default/grub.d/tortoiselab.cfg
    update-grub 2>/dev/null
    log "GRUB default: $entry"
  else
    log "warning: no GRUB entry id found for $rel; the newest kernel boots by default"
  fi
else
  log "warning: no GRUB here; make sure $rel boots by default"
fi

if [ "$(uname -r)" = "$rel" ]; then
  log "already running $rel"
else
  log "running $(uname -r); the reboot that follows boots $rel"
fi
