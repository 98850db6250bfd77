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

# shellcheck source=scripts/apt-missing.sh
. "$here/scripts/apt-missing.sh"
# strace: tests/unit/test_stored_traces.py shows that no reader of a results
# folder opens a file the folder names elsewhere (docs/faults.md)
packages=(vagrant vagrant-libvirt dkms strace "$headers_pkg=$headers_ver")  # the headers at kernel/DEBIAN_VERSION's pin
mapfile -t missing < <(missing_packages "${packages[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup-test: all ${#packages[@]} packages present"
  exit 0
fi
choose_sudo setup-test setup-test "${missing[@]}"
echo "setup-test: installing ${missing[*]}"
apt_install "${missing[@]}"
