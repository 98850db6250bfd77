#!/usr/bin/env bash
# Builds the UML lab kernel from Debian's pinned linux-source-6.12, our config
# fragment and our modules, into a cache outside the clone keyed by a hash of
# those inputs. Prints the path of the kernel binary on its last line.
#
#   kernel/build-uml.sh            build if the cache has no kernel for these inputs
#   kernel/build-uml.sh --hash     print the input hash only
#   kernel/build-uml.sh --path     print where the kernel is/would be
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${TORTOISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tortoiselab}"
src_tar="/usr/src/linux-source-6.12.tar.xz"
jobs="${JOBS:-$(nproc)}"

inputs_hash() {
  {
    echo "debian-version $(cat "$here/DEBIAN_VERSION")"
    sha256sum "$here/lab.config" "$here/build-uml.sh" | awk '{print $1}'
    if [ -d "$here/modules" ]; then
      (cd "$here/modules" && find . -type f \( -name '*.c' -o -name '*.h' -o -name 'Kbuild' -o -name 'Kconfig' \) -print0 \
        | sort -z | xargs -0 -r sha256sum)
    fi
  } | sha256sum | cut -c1-16
}

hash="$(inputs_hash)"
out="$cache/kernel/uml-$hash"
case "${1:-}" in
  --hash) echo "$hash"; exit 0 ;;
  --path) echo "$out/linux"; exit 0 ;;
esac

if [ -x "$out/linux" ] && [ -f "$out/BUILD_OK" ]; then
  echo "lab kernel: cached ($hash)" >&2
  echo "$out/linux"
  exit 0
fi

want="$(cat "$here/DEBIAN_VERSION")"
have="$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)"
if [ "$have" != "$want" ] || [ ! -f "$src_tar" ]; then
  echo "lab kernel: needs linux-source-6.12=$want (have '${have:-none}'); run 'make setup'" >&2
  exit 1
fi

mkdir -p "$cache/kernel"
work="$(mktemp -d "$cache/kernel/build-$hash.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "lab kernel: extracting $src_tar ($want)" >&2
tar -C "$work" -xf "$src_tar"
tree="$work/linux-source-6.12"

# our congestion control modules, in tree under net/ipv4/tortoise
if compgen -G "$here/modules/tcp_*.c" >/dev/null; then
  mkdir -p "$tree/net/ipv4/tortoise"
  cp "$here"/modules/tcp_*.c "$tree/net/ipv4/tortoise/"
  printf 'obj-y += %s\n' $(cd "$here/modules" && ls tcp_*.c | sed 's/\.c$/.o/') > "$tree/net/ipv4/tortoise/Makefile"
  echo 'obj-y += tortoise/' >> "$tree/net/ipv4/Makefile"
fi

echo "lab kernel: configuring (ARCH=um)" >&2
make -C "$tree" -s ARCH=um SUBARCH=x86_64 defconfig >&2
(cd "$tree" && ARCH=um SUBARCH=x86_64 ./scripts/kconfig/merge_config.sh -m .config "$here/lab.config" >&2)
make -C "$tree" -s ARCH=um SUBARCH=x86_64 olddefconfig >&2

# every option in the fragment must have survived olddefconfig
bad=0
while IFS= read -r line; do
  case "$line" in CONFIG_*=*) ;; *) continue ;; esac
  if ! grep -qx "$line" "$tree/.config"; then
    echo "lab kernel: option did not take effect: $line (have: $(grep "^${line%%=*}=" "$tree/.config" || echo unset))" >&2
    bad=1
  fi
done < "$here/lab.config"
[ "$bad" -eq 0 ] || exit 1

echo "lab kernel: building with $jobs jobs" >&2
make -C "$tree" -s ARCH=um SUBARCH=x86_64 -j"$jobs" linux >&2

rm -rf "$out"
mkdir -p "$out"
cp "$tree/linux" "$out/linux"
cp "$tree/.config" "$out/config"
make -C "$tree" -s ARCH=um SUBARCH=x86_64 kernelrelease > "$out/release"
echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s from linux-source-6.12=$want" > "$out/BUILD_OK"
chmod -R a+rX "$out"
echo "lab kernel: built in $(( $(date +%s) - start )) s -> $out/linux" >&2
echo "$out/linux"
