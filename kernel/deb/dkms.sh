#!/usr/bin/env bash
# Our congestion control modules under DKMS (the VM's fast path). kernel/ is
# the DKMS source tree (kernel/dkms.conf); DKMS copies it to
# /usr/src/<name>-<version>/ and rebuilds the modules for every kernel whose
# headers get installed later (AUTOINSTALL).
#
#   kernel/deb/dkms.sh install [RELEASE...]  register (afresh), build and install for each
#                                             RELEASE (default: the pinned Debian kernel), as root
#   kernel/deb/dkms.sh remove                 unregister every version, drop its /usr/src copy
#   kernel/deb/dkms.sh check RELEASE KDIR DIR add + build for RELEASE against the headers in
#                                             KDIR in a private DKMS tree under DIR: touches
#                                             nothing of the system's DKMS, /usr/src or /lib/modules
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"   # kernel/
# shellcheck source=vars.sh
source "$here/deb/vars.sh"
mod="$DKMS_NAME/$DKMS_VERSION"

need_root() { [ "$(id -u)" -eq 0 ] || { echo "dkms.sh: $1 needs root" >&2; exit 1; }; }

remove_all() {
  local v
  for v in $(dkms status -m "$DKMS_NAME" 2>/dev/null | sed -n 's|^[^/]*/\([^,:]*\)[,:].*|\1|p' | sort -u); do
    dkms remove "$DKMS_NAME/$v" --all || true
  done
}

case "${1:-}" in
  install)
    need_root install; shift
    [ $# -gt 0 ] || set -- "$STOCK_RELEASE"
    remove_all
    # --force: refresh /usr/src/<name>-<version> from kernel/ (sources may have changed)
    dkms add "$here" --force
    for rel in "$@"; do
      [ -d "/lib/modules/$rel/build" ] || { echo "dkms.sh: no headers for $rel (/lib/modules/$rel/build)" >&2; exit 1; }
      dkms build "$mod" -k "$rel"
      dkms install "$mod" -k "$rel"
      for m in $(sed -n 's/^BUILT_MODULE_NAME\[[0-9]*\]="\(.*\)"$/\1/p' "$here/dkms.conf"); do
        modinfo -k "$rel" -n "$m" >/dev/null || { echo "dkms.sh: $m not found for $rel after install" >&2; exit 1; }
      done
    done
    dkms status -m "$DKMS_NAME"
    ;;
  remove)
    need_root remove
    remove_all
    rm -rf "/usr/src/$DKMS_NAME-"*
    ;;
  check)
    [ $# -eq 4 ] || { echo "usage: dkms.sh check RELEASE KDIR DIR" >&2; exit 2; }
    rel="$2"; kdir="$3"; dir="$4"
    mkdir -p "$dir/tree" "$dir/src" "$dir/install" "$dir/keys"
    opts=(--dkmstree "$dir/tree" --sourcetree "$dir/src" --installtree "$dir/install")
    # DKMS signs what it builds; keep its key pair out of /var/lib/dkms
    export mok_signing_key="$dir/keys/mok.key" mok_certificate="$dir/keys/mok.pub"
    dkms add "$here" "${opts[@]}"
    dkms build "$mod" -k "$rel" --kernelsourcedir "$kdir" "${opts[@]}"
    dkms status -m "$DKMS_NAME" "${opts[@]}"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
