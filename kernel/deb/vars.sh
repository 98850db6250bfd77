#!/usr/bin/env bash
# shellcheck disable=SC2034  # sourced: the names are for the scripts that source this
# The VM's kernel versions, derived from the one pin the project has:
# kernel/DEBIAN_VERSION (Debian's linux-source-6.12 version, e.g.
# 6.12.117-1~deb12u1). Debian's bookworm-security 6.12 packages built from
# that source are named with the ABI 6.12.117+deb12, so the fast path's
# kernel is linux-image-6.12.117+deb12-amd64 at that exact version.
#
#   kernel/deb/vars.sh              print NAME=value lines (shell syntax)
#   kernel/deb/vars.sh NAME         print one value
#
# TORTOISE_VM_KERNEL_VERSION overrides the pin (a Debian version of the
# linux 6.12 source package in bookworm-security, same syntax).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEB_VERSION="${TORTOISE_VM_KERNEL_VERSION:-$(cat "$here/DEBIAN_VERSION")}"
case "$DEB_VERSION" in
  6.12.*-*~deb12u*) ;;
  *) echo "vars.sh: '$DEB_VERSION' is not a bookworm-security 6.12 version (6.12.N-R~deb12uK)" >&2; exit 2 ;;
esac
UPSTREAM="${DEB_VERSION%%-*}"                 # 6.12.117
ABI="${UPSTREAM}+deb12"                       # 6.12.117+deb12
FLAVOUR="amd64"
STOCK_RELEASE="${ABI}-${FLAVOUR}"             # uname -r of Debian's kernel
IMAGE_PKG="linux-image-${STOCK_RELEASE}"
HEADERS_PKG="linux-headers-${STOCK_RELEASE}"
HEADERS_DIR="/usr/src/${HEADERS_PKG}"
CONFIG_PKG="linux-config-6.12"                # Debian's configs, same source version
CONFIG_XZ="/usr/src/linux-config-6.12/config.${FLAVOUR}_none_${FLAVOUR}.xz"
LOCALVERSION="-tortoise"
LAB_RELEASE="${UPSTREAM}${LOCALVERSION}"      # uname -r of our patched kernel (make kernel-deb)
DKMS_NAME="$(sed -n 's/^PACKAGE_NAME="\(.*\)"$/\1/p' "$here/dkms.conf")"
DKMS_VERSION="$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$here/dkms.conf")"

vars=(DEB_VERSION UPSTREAM ABI FLAVOUR STOCK_RELEASE IMAGE_PKG HEADERS_PKG HEADERS_DIR CONFIG_PKG CONFIG_XZ
      LOCALVERSION LAB_RELEASE DKMS_NAME DKMS_VERSION)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if [ $# -eq 1 ]; then
    v="$1"; [[ " ${vars[*]} " == *" $v "* ]] || { echo "vars.sh: unknown name $v" >&2; exit 2; }
    printf '%s\n' "${!v}"
  else
    for v in "${vars[@]}"; do printf '%s=%q\n' "$v" "${!v}"; done
  fi
fi
