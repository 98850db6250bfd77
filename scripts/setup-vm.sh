#!/usr/bin/env bash
# The host packages of the VM targets (`make vm-box`, `make vm-test`), from
# Debian: mmdebstrap and fdisk to build the box, qemu to run it, libvirt and
# Vagrant with its libvirt plugin to run the Vagrantfile. Idempotent like
# setup-system.sh: only missing packages are installed. Root or sudo.
set -euo pipefail

packages=(mmdebstrap fdisk qemu-utils qemu-system-x86 libvirt-daemon-system libvirt-clients
          dnsmasq-base vagrant vagrant-libvirt rsync openssh-client)
# shellcheck source=scripts/apt-missing.sh
. "$(cd "$(dirname "$0")" && pwd)/apt-missing.sh"
mapfile -t missing < <(missing_packages "${packages[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-vm: all ${#packages[@]} packages present"
  exit 0
fi
choose_sudo setup-vm vm-setup "${missing[@]}"
echo "setup-vm: installing ${missing[*]}"
apt_install "${missing[@]}"
