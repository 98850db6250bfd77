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
#                              recommends, non-interactive), through $SUDO;
#                              apt's own output goes to a log, the terminal
#                              gets packages of the total (apt_progress)
#   apt_progress TOTAL         reads apt's status lines (APT::Status-Fd) on
#                              stdin, prints a line per file fetched and per
#                              package installed, each of the total

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
  local log total
  log="$(mktemp "${TMPDIR:-/tmp}/tortoiselab-apt.XXXXXX.log")"
  echo "apt: updating the package lists (log: $log)"
  $SUDO apt-get update -q >>"$log" 2>&1 || { tail -20 "$log" >&2; return 1; }
  # what apt will install: the SPECs and what they depend on ("Inst" lines of a dry run)
  total="$(apt-get -s install --no-install-recommends "$@" 2>>"$log" | grep -c '^Inst ' || true)"
  echo "apt: installing $total packages (${#@} asked for, the rest their dependencies)"
  # the status lines on stdout into apt_progress, apt's own output into the log
  # (sudo closes other descriptors, so the swap happens inside its shell)
  if ! (set -o pipefail
         $SUDO bash -c '"$@" 3>&1 1>>"$0" 2>&1' "$log" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
           apt-get install -y -q --no-install-recommends -o APT::Status-Fd=3 "$@" | apt_progress "$total"); then
    echo "apt: install failed; the end of $log:" >&2; tail -20 "$log" >&2; return 1
  fi
  echo "apt: done (log: $log)"
}

apt_progress() {
  # dlstatus:<n>:<percent>:Retrieving file <k> of <m>   pmstatus:<pkg>:<percent>:Installed <pkg>
  awk -F: -v total="$1" '
    $1 == "dlstatus" && $4 ~ /^Retrieving file/ { if ($4 != last) print "apt: " $4; last = $4; fflush() }
    $1 == "pmstatus" && $4 ~ /^Installed / { n++; printf "apt: %d of %d packages installed (%s)\n", n, total, $2; fflush() }
  '
}
