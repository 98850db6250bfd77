#!/bin/sh
# Tortoise Lab VM, first provisioning step (root): only what running the
# project's own `make setup` needs on a bare Debian 12 box: Debian's
# security suite in apt's sources (where linux-source-6.12 and the 6.12
# kernels live) and `make` itself. Every lab package comes from `make setup`.
set -eu

. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
  echo "bootstrap: this VM must be Debian 12 (bookworm), found ${PRETTY_NAME:-unknown}" >&2
  exit 1
fi

if ! grep -rqs "bookworm-security" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "bootstrap: adding Debian's bookworm-security suite to apt's sources"
  echo "deb http://deb.debian.org/debian-security bookworm-security main" \
    > /etc/apt/sources.list.d/tortoiselab-security.list
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
if ! command -v make >/dev/null; then
  apt-get install -y -q --no-install-recommends make
fi
echo "bootstrap: $(make --version | head -1); apt sources ok"
