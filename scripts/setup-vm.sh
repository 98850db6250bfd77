#!/usr/bin/env bash
# The host packages of the VM targets (`make vm-box`, `make vm-test`), from
# Debian: mmdebstrap and fdisk to build the box, qemu to run it, libvirt and
# Vagrant with its libvirt plugin to run the Vagrantfile. Idempotent like
# setup-system.sh: only missing packages are installed. Root or sudo.
set -euo pipefail

packages=(mmdebstrap fdisk qemu-utils qemu-system-x86 libvirt-daemon-system libvirt-clients
          dnsmasq-base vagrant vagrant-libvirt rsync openssh-client)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-vm: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-vm: missing ${missing[*]}; run as root" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup-vm: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
