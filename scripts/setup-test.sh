#!/usr/bin/env bash
# The packages `make test` needs beyond `make setup`, from Debian (bookworm +
# bookworm-security): tests/integration/test_vagrant.py checks the course VM
# without booting it, with Vagrant and its libvirt plugin (the Vagrantfile
# validates), DKMS and the headers of the VM's pinned kernel (our modules
# build for it; the headers bring that kernel's image, whose modules.dep the
# test reads). Tests install nothing: a missing package fails its test,
# naming this target. Idempotent like setup-system.sh: only missing packages
# are installed. Root or sudo.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
headers_pkg="$(bash "$here/kernel/deb/vars.sh" HEADERS_PKG)"
headers_ver="$(bash "$here/kernel/deb/vars.sh" DEB_VERSION)"

packages=(vagrant vagrant-libvirt dkms "$headers_pkg")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# the pinned version of the headers (kernel/DEBIAN_VERSION)
if dpkg-query -W -f='${Version}' "$headers_pkg" 2>/dev/null | grep -qvx "$headers_ver"; then
  missing+=("$headers_pkg")
fi
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-test: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-test: missing ${missing[*]}; run 'make setup-test' as root" >&2; exit 1; }
  SUDO=sudo
fi
install=()
for p in "${missing[@]}"; do
  if [ "$p" = "$headers_pkg" ]; then install+=("$p=$headers_ver"); else install+=("$p"); fi
done
echo "setup-test: installing ${install[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${install[@]}"
