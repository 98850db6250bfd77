# Sourced by the set-up scripts (setup-system.sh, setup-test.sh, setup-vm.sh):
# which of their Debian packages are missing, and how to install them.
#
#   missing_packages SPEC...   each SPEC is a package, or package=version for a
#                              pinned one; prints the SPECs not installed (or,
#                              pinned, installed at another version), one per line
#   choose_sudo WHAT TARGET SPEC...
#                              sets SUDO: "" as root, "sudo" where there is one;
#                              else says which SPECs are missing and that
#                              `make TARGET` must run once as root, and exits 1
#   apt_install SPEC...        apt-get update, then install the SPECs (no
#                              recommends, non-interactive), through $SUDO

missing_packages() {
  local spec pkg ver
  for spec in "$@"; do
    pkg="${spec%%=*}"
    ver=""
    [ "$pkg" != "$spec" ] && ver="${spec#*=}"
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      echo "$spec"
    elif [ -n "$ver" ] && [ "$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)" != "$ver" ]; then
      echo "$spec"
    fi
  done
}

choose_sudo() {
  SUDO=""
  [ "$(id -u)" -eq 0 ] && return 0
  if command -v sudo >/dev/null; then SUDO="sudo"; return 0; fi
  echo "$1: missing packages: ${*:3}" >&2
  echo "$1: run 'make $2' once as root (or install them), then rerun as this user" >&2
  exit 1
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "$@"
}
