#!/usr/bin/env bash
# Installs the lab's system packages from Debian (bookworm + bookworm-security).
# Idempotent: only packages that are missing are installed, and apt's lists are
# refreshed only when something has to be installed.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
kernel_pkg="linux-source-6.12"
kernel_ver="$(cat "$here/kernel/DEBIAN_VERSION")"

packages=(
  # lab kernel build (UML)
  build-essential bc bison flex xz-utils libelf-dev "${kernel_pkg}=${kernel_ver}"  # the pinned source
  # emulation and the lab's hosts
  mininet openvswitch-switch openvswitch-common bridge-utils iproute2 ethtool iputils-ping
  procps tcpdump socat dnsmasq-base
  # web tier and clients
  apache2 nghttp2-client curl openssl ca-certificates
  # the browser loader (tortoiselab.browser): Debian's Chromium, driven by
  # Playwright from PyPI (no browser download), and NSS's certutil for the
  # per-load database that trusts the lab CA
  chromium libnss3-tools
  # the lab's interpreter: Debian's python3 (for python3-mininet) + a venv
  python3 python3-venv python3-pip
  # Slurm for the cluster executor's test: a private single-node cluster the
  # test configures and starts itself (the machine's daemons stay off, below)
  slurm-wlm slurmctld slurmd slurm-client munge
)
# packages whose postinst would start (and enable) a system-wide daemon
daemons=(munge slurmctld slurmd)

# shellcheck source=scripts/apt-missing.sh
. "$here/scripts/apt-missing.sh"
mapfile -t missing < <(missing_packages "${packages[@]}")

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-system: all ${#packages[@]} packages present"
  exit 0
fi
choose_sudo setup-system setup "${missing[@]}"
install=("${missing[@]}")
echo "setup-system: installing ${install[*]}"

# Daemons we install must not start on this (possibly shared) machine: the
# test starts its own munge/slurmctld/slurmd in a temporary folder. A
# policy-rc.d that answers 101 stops invoke-rc.d and deb-systemd-invoke from
# starting them; we add one only if the machine has none, and remove only ours.
new_daemons=()
for d in "${daemons[@]}"; do
  for m in "${missing[@]}"; do [ "${m%%=*}" = "$d" ] && new_daemons+=("$d"); done
done
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ "${#new_daemons[@]}" -gt 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# tortoiselab setup-system: no daemon starts during this install\nexit 101\n' \
    | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  own_policy=1
  trap '$SUDO rm -f "$policy"' EXIT
fi
apt_install "${install[@]}"
# ... nor start at the next boot (systemd enables units in postinst)
if [ "${#new_daemons[@]}" -gt 0 ] && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable "${new_daemons[@]/%/.service}" >/dev/null 2>&1 || true
  echo "setup-system: installed but not enabled: ${new_daemons[*]}"
fi
[ -n "$own_policy" ] && $SUDO rm -f "$policy" && trap - EXIT
true
