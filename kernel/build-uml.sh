#!/usr/bin/env bash
# Builds the UML lab kernel from Debian's pinned linux-source, our config
# fragment and our modules, into a cache outside the clone keyed by a hash of
# those inputs. Prints the path of the kernel binary on its last line.
#
# Two kernel series, chosen by TORTOISE_KERNEL_SERIES (default: the one
# kernel/SERIES names, 7.3 since batches; docs/kernel-7.3.md):
#   7.3   linux-source-7.3 from trixie-backports, fetched into the cache by
#         kernel/fetch-source.sh (pin: kernel/sources/7.3), with the 7.3
#         changes of the fragment in kernel/lab-7.3.config; UML's seccomp mode
#   6.12  linux-source-6.12 installed by `make setup` (kernel/DEBIAN_VERSION):
#         the kernel of results made before, and of the Vagrant VM
#
#   kernel/build-uml.sh                 build kernel + our modules where the cache lacks them
#   kernel/build-uml.sh --hash          print the input hash only
#   kernel/build-uml.sh --path          print where the kernel is/would be
#   kernel/build-uml.sh --modules-path  print where our modules are/would be
#
# Two levels: the kernel (source version + config + this script) and our
# modules (kernel hash + kernel/modules/*), built out of tree against the
# kernel's kept build tree, so editing a module rebuilds it in seconds.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${TORTOISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tortoiselab}"
jobs="${JOBS:-$(nproc)}"
series="${TORTOISE_KERNEL_SERIES:-$(cat "$here/SERIES")}"
case "$series" in
  6.12)
    want="$(cat "$here/DEBIAN_VERSION")"
    base=defconfig
    fragments=("$here/lab.config")
    prefix="uml" ;;
  *)
    [ -f "$here/sources/$series" ] || { echo "lab kernel: unknown series '$series' (no kernel/sources/$series)" >&2; exit 1; }
    want="$(sed -n 's/^VERSION=//p' "$here/sources/$series")"
    # what the lab uses over allnoconfig, not UML's defconfig (docs/kernel-7.3.md,
    # "A kernel of what the lab uses")
    base=allnoconfig
    fragments=("$here/uml-base.config" "$here/lab.config" "$here/lab-$series.config")
    prefix="uml$series" ;;
esac

kernel_hash() {
  {
    echo "debian-version $want"
    sha256sum "${fragments[@]}" "$here/build-uml.sh" | awk '{print $1}'
  } | sha256sum | cut -c1-16
}

modules_hash() {
  {
    echo "kernel $1"
    if [ -d "$here/modules" ]; then
      (cd "$here/modules" && find . -type f \( -name '*.c' -o -name '*.h' -o -name 'Kbuild' \) -print0 \
        | sort -z | xargs -0 -r sha256sum)
    fi
  } | sha256sum | cut -c1-16
}

hash="$(kernel_hash)"
out="$cache/kernel/$prefix-$hash"
mhash="$(modules_hash "$hash")"
mods="$out/modules-$mhash"
case "${1:-}" in
  --hash) echo "$hash-$mhash"; exit 0 ;;
  --path) echo "$out/linux"; exit 0 ;;
  --modules-path) echo "$mods"; exit 0 ;;
esac

build_modules() {
  # our congestion control modules, out of tree against the kept build tree
  if ! compgen -G "$here/modules/tcp_*.c" >/dev/null; then return 0; fi
  if [ -f "$mods/BUILD_OK" ]; then echo "lab modules: cached ($mhash)" >&2; return 0; fi
  local mwork
  mwork="$(mktemp -d "$out/mbuild.XXXXXX")"
  cp "$here"/modules/tcp_*.c "$here/modules/Kbuild" "$mwork/"
  echo "lab modules: building $(cd "$mwork" && ls tcp_*.c | tr '\n' ' ')" >&2
  if ! make -C "$out/tree" -s ARCH=um SUBARCH=x86_64 M="$mwork" -j"$jobs" modules >&2; then
    rm -rf "$mwork"; echo "lab modules: build failed" >&2; return 1
  fi
  rm -rf "$mods"; mkdir -p "$mods"
  cp "$mwork"/*.ko "$mods/"
  rm -rf "$mwork"
  echo "built $(date -u +%FT%TZ)" > "$mods/BUILD_OK"
  chmod -R a+rX "$mods"
  echo "lab modules: built -> $mods" >&2
}

if [ -x "$out/linux" ] && [ -f "$out/BUILD_OK" ]; then
  echo "lab kernel: cached ($hash)" >&2
  build_modules
  echo "$out/linux"
  exit 0
fi

if [ "$series" = 6.12 ]; then
  src_tar="/usr/src/linux-source-6.12.tar.xz"
  have="$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)"
  if [ "$have" != "$want" ] || [ ! -f "$src_tar" ]; then
    echo "lab kernel: needs linux-source-6.12=$want (have '${have:-none}'); run 'make setup'" >&2
    exit 1
  fi
else
  src_tar="$(bash "$here/fetch-source.sh" "$series" | tail -1)"
fi

mkdir -p "$cache/kernel"
work="$(mktemp -d "$cache/kernel/build-$hash.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "lab kernel: extracting $src_tar ($want)" >&2
tar -C "$work" -xf "$src_tar"
tree="$(echo "$work"/linux-source-*)"

echo "lab kernel: configuring (ARCH=um)" >&2
make -C "$tree" -s ARCH=um SUBARCH=x86_64 "$base" >&2
(cd "$tree" && ARCH=um SUBARCH=x86_64 ./scripts/kconfig/merge_config.sh -m .config "${fragments[@]}" >&2)
make -C "$tree" -s ARCH=um SUBARCH=x86_64 olddefconfig >&2

# every option in the fragments must have survived olddefconfig; on a series
# other than 6.12 every symbol must also exist in its Kconfig, unless the
# series' fragment drops it with a reason ("#drop CONFIG_X reason")
dropped=""
if [ "${#fragments[@]}" -gt 1 ]; then
  dropped="$(sed -n 's/^#drop \(CONFIG_[A-Za-z0-9_]*\) .*/\1/p' "${fragments[@]:1}")"
  known="$(find "$tree" -name 'Kconfig*' -type f -print0 | xargs -0 grep -hoE '^[[:space:]]*(menu)?config [A-Za-z0-9_]+' \
    | awk '{print "CONFIG_" $2}' | sort -u)"
fi
bad=0
for frag in "${fragments[@]}"; do
  while IFS= read -r line; do
    case "$line" in CONFIG_*=*|"# CONFIG_"*" is not set") ;; *) continue ;; esac
    sym="${line#\# }"; sym="${sym%%=*}"; sym="${sym%% *}"
    if [ -n "$dropped" ] && grep -qx "$sym" <<<"$dropped"; then
      echo "lab kernel: $series drops $sym: $(sed -n "s/^#drop $sym //p" "${fragments[@]:1}")" >&2
      continue
    fi
    if [ "${#fragments[@]}" -gt 1 ] && ! grep -qx "$sym" <<<"$known"; then
      echo "lab kernel: $sym is not an option of $series (renamed or gone): drop it in lab-$series.config with a reason" >&2
      bad=1; continue
    fi
    # a later fragment may set the symbol otherwise: the last one counts
    last="$(grep -hE "^(# )?$sym[= ]" "${fragments[@]}" | tail -1)"
    [ "$last" = "$line" ] || continue
    if [ "${line:0:1}" = "#" ] && ! grep -q "^$sym=" "$tree/.config"; then continue; fi
    if ! grep -qx "$line" "$tree/.config"; then
      echo "lab kernel: option did not take effect: $line (have: $(grep "^$sym=" "$tree/.config" || echo unset))" >&2
      bad=1
    fi
  done < "$frag"
done
[ "$bad" -eq 0 ] || exit 1

# the kernel's version string (`uname -v`) is mixed into the guest's random
# pool at boot (docs/determinism.md): with the build's date and host in it,
# every build of the same inputs gave other boot ids and runs; fixed, a
# build is the same kernel on every machine and every day
export KBUILD_BUILD_TIMESTAMP="Thu Jan  1 00:00:00 UTC 2026" KBUILD_BUILD_VERSION=1
export KBUILD_BUILD_USER=tortoise KBUILD_BUILD_HOST=lab
echo "lab kernel: building with $jobs jobs" >&2
# `all` = the kernel, the few stock modules and Module.symvers, which
# building our modules out of tree needs
make -C "$tree" -s ARCH=um SUBARCH=x86_64 -j"$jobs" all >&2

rm -rf "$out"
mkdir -p "$out"
cp "$tree/linux" "$out/linux"
cp "$tree/.config" "$out/config"
make -C "$tree" -s ARCH=um SUBARCH=x86_64 kernelrelease > "$out/release"
# keep what building external modules needs ("clean" keeps exactly that)
make -C "$tree" -s ARCH=um SUBARCH=x86_64 clean >&2
mv "$tree" "$out/tree"
echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s from $(basename "$src_tar" .tar.xz)=$want" > "$out/BUILD_OK"
echo "$want" > "$out/source-version"
chmod -R a+rX "$out"
echo "lab kernel: built in $(( $(date +%s) - start )) s -> $out/linux" >&2
build_modules
echo "$out/linux"
