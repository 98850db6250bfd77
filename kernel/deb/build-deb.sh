#!/usr/bin/env bash
# The VM's full kernel path: Debian packages of the patched 6.12 kernel.
# Debian's linux-source-6.12 (the version pinned in kernel/DEBIAN_VERSION) +
# Debian's own amd64 config (linux-config-6.12, same version) with
# kernel/lab.config and kernel/deb/vm.config merged over it + our
# congestion control modules in tree under net/ipv4/ (tristate, =m), built
# with the kernel's `make bindeb-pkg`.
#
#   kernel/deb/build-deb.sh dry-run   configure and check, build nothing big (about a minute):
#                                     every fragment option took effect, every TCP_CONG_*
#                                     algorithm is y or m, the kernel's debian/ packaging is
#                                     generated (the first step of bindeb-pkg) with the
#                                     package names we install and its build dependencies
#                                     met, and our in-tree modules compile in the tree
#   kernel/deb/build-deb.sh build     dry-run, then make bindeb-pkg (hours on 2 cores; cached)
#   kernel/deb/build-deb.sh install   build, then dpkg -i the image and headers packages (root)
#   kernel/deb/build-deb.sh --hash | --path
#
# Work and output go to $TORTOISE_CACHE/kernel/deb-<hash>/ (default
# ~/.cache/tortoiselab), the hash covering the source version, Debian's
# config, both fragments, this script and kernel/modules/. JOBS=N sets the
# parallelism (default: all cores). KEEP_TREE=1 keeps the built tree.
#
# Why not `make -n bindeb-pkg`: in 6.12 its recipe is `+dpkg-buildpackage ...`,
# and make runs '+' lines even under -n, so it is no dry run: without debian/
# it fails at once, with it dpkg-buildpackage runs the packaging on an unbuilt
# tree. dry-run runs bindeb-pkg's own first step (scripts/package/mkdebian)
# and checks what dpkg-buildpackage would need instead.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"   # kernel/
# the full path builds the pinned source: no fast-path override here
unset TORTOISE_VM_KERNEL_VERSION
# shellcheck source=vars.sh
source "$here/deb/vars.sh"
cache="${TORTOISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tortoiselab}"
src_tar="/usr/src/linux-source-6.12.tar.xz"
jobs="${JOBS:-$(nproc)}"

log() { echo "kernel-deb: $*" >&2; }
die() { log "$*"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

apt_install() {
  log "installing $*"
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then die "need root (or sudo) to install: $*"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends "$@" >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q --no-install-recommends "$@" >&2; }
}

installed_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

# our modules, one per kernel/modules/tcp_<name>.c -> CONFIG_TCP_CONG_<NAME>
module_names() { (cd "$here/modules" && ls tcp_*.c) | sed 's/^tcp_//; s/\.c$//'; }
module_sym() { echo "TCP_CONG_$(echo "$1" | tr '[:lower:]' '[:upper:]')"; }

input_hash() {
  {
    echo "debian-version $DEB_VERSION"
    [ -f "$CONFIG_XZ" ] && xz -dc "$CONFIG_XZ" | sha256sum
    sha256sum "$here/lab.config" "$here/deb/vm.config" "$here/deb/build-deb.sh" | awk '{print $1}'
    (cd "$here/modules" && find . -type f \( -name '*.c' -o -name '*.h' -o -name 'Kbuild' \) -print0 \
      | sort -z | xargs -0 -r sha256sum)
  } | sha256sum | cut -c1-16
}

deps() {
  # the pinned source comes from `make setup`; Debian's config of the same version is ours to add
  [ "$(installed_version linux-source-6.12)" = "$DEB_VERSION" ] && [ -f "$src_tar" ] \
    || die "needs linux-source-6.12=$DEB_VERSION (have '$(installed_version linux-source-6.12)'): run 'make setup'"
  local need=()
  [ "$(installed_version "$CONFIG_PKG")" = "$DEB_VERSION" ] || need+=("$CONFIG_PKG=$DEB_VERSION")
  local p
  for p in debhelper dpkg-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if [ "${#need[@]}" -gt 0 ]; then apt_install "${need[@]}"; fi
  [ -f "$CONFIG_XZ" ] || die "Debian's config $CONFIG_XZ missing after installing $CONFIG_PKG"
}

# the fragment checker: every line of every fragment must hold in .config
# after olddefconfig, a later fragment winning for the same symbol. Symbols
# only UML has (kernel/lab.config serves the UML lab kernel too) are skipped,
# and said so.
uml_only() {
  local sym="$1" defs
  defs="$(grep -rlx --include='Kconfig*' "config $sym" "$tree" 2>/dev/null || true)"
  [ -n "$defs" ] || return 1
  local f
  while IFS= read -r f; do
    case "$f" in "$tree/arch/um/"*) continue ;; esac
    # defined outside arch/um: UML-only if its block depends on UML
    awk -v s="config $sym" '$0==s {on=1; next}
                            on && /^(config|menuconfig|choice|endchoice|menu|endmenu|if|endif|source)( |$)/ {exit}
                            on && /^[ \t]*depends on UML$/ {found=1} END {exit !found}' "$f" || return 1
  done <<< "$defs"
  return 0
}

check_config() {
  declare -A want=() from=()
  local frag line sym order=()
  for frag in "$@"; do
    while IFS= read -r line; do
      case "$line" in CONFIG_*=*|"# CONFIG_"*" is not set") ;; *) continue ;; esac
      sym="${line#\# }"; sym="${sym%%=*}"; sym="${sym%% *}"
      [ -n "${want[$sym]+x}" ] || order+=("$sym")
      want[$sym]="$line"; from[$sym]="$(basename "$frag")"
    done < "$frag"
  done
  local bad=0 skipped=() n=0
  for sym in "${order[@]}"; do
    line="${want[$sym]}"
    if grep -Fqx "$line" "$tree/.config"; then n=$((n + 1)); continue; fi
    # "is not set" also holds when the symbol is absent (its dependencies are off)
    if [ "${line:0:1}" = "#" ] && ! grep -q "^$sym=" "$tree/.config"; then n=$((n + 1)); continue; fi
    if ! grep -q "^$sym=\|^# $sym is not set" "$tree/.config" && uml_only "${sym#CONFIG_}"; then
      skipped+=("${sym#CONFIG_}"); continue
    fi
    log "option did not take effect: $line (${from[$sym]}; have: $(grep "^$sym=\|^# $sym is not set" "$tree/.config" || echo absent))"
    bad=1
  done
  # every congestion control algorithm the source has, built in or a module
  local s
  for s in $(sed -n 's/^config \(TCP_CONG_[A-Z0-9_]*\)$/\1/p' "$tree/net/ipv4/Kconfig" "$tree/net/ipv4/Kconfig.tortoise"); do
    [ "$s" = TCP_CONG_ADVANCED ] && continue
    grep -q "^CONFIG_$s=[ym]$" "$tree/.config" || { log "algorithm not built: CONFIG_$s"; bad=1; }
  done
  [ "$bad" -eq 0 ] || die "configuration check failed"
  log "config: $n fragment options hold; skipped as UML-only: ${skipped[*]:-none}"
  log "config: algorithms: $(grep -o '^CONFIG_TCP_CONG_[A-Z0-9_]*=[ym]' "$tree/.config" | grep -v ADVANCED \
      | sed 's/CONFIG_TCP_CONG_//' | tr '\n' ' ')"
}

# our modules in tree: net/ipv4/tcp_<name>.c, a Kconfig entry and a Makefile line each
add_modules_in_tree() {
  local kc="$tree/net/ipv4/Kconfig.tortoise" name sym desc
  : > "$kc"
  echo "# Tortoise Lab congestion control modules (generated by kernel/deb/build-deb.sh)" >> "$kc"
  for name in $(module_names); do
    sym="$(module_sym "$name")"
    desc="$(sed -n 's/^MODULE_DESCRIPTION("\(.*\)");$/\1/p' "$here/modules/tcp_$name.c" | head -1)"
    cp "$here/modules/tcp_$name.c" "$tree/net/ipv4/"
    cat >> "$kc" <<EOF

config $sym
	tristate "$name: ${desc:-Tortoise Lab congestion control}"
	depends on TCP_CONG_ADVANCED
	default n
	help
	  Tortoise Lab's $name congestion control (kernel/modules/tcp_$name.c),
	  registered as "$name". See kernel/modules/README.md.
EOF
    echo "obj-\$(CONFIG_$sym) += tcp_$name.o" >> "$tree/net/ipv4/Makefile"
  done
  echo 'source "net/ipv4/Kconfig.tortoise"' >> "$tree/net/ipv4/Kconfig"
}

init() {
  deps
  hash="$(input_hash)"
  out="$cache/kernel/deb-$hash"
  tree="$out/linux-source-6.12"
  pkgversion="${DEB_VERSION}+tortoise.${hash:0:8}"
}

prepare() {
  init
  mkdir -p "$out"
  if [ ! -f "$tree/.tortoise-prepared" ]; then
    rm -rf "$tree" "$out/extract"
    # trees of older inputs are GBs; their packages stay
    local old
    for old in "$cache"/kernel/deb-*/linux-source-6.12; do
      [ -d "$old" ] && [ "$old" != "$tree" ] && { log "removing the old tree $old"; rm -rf "$old"; }
    done
    log "extracting $src_tar ($DEB_VERSION) into $out"
    mkdir -p "$out/extract"
    tar -C "$out/extract" -xf "$src_tar"
    mv "$out/extract/linux-source-6.12" "$tree"
    rmdir "$out/extract"
    add_modules_in_tree
    touch "$tree/.tortoise-prepared"
  fi
  # configure (cheap, redone every time so the check always sees a fresh merge)
  local frag_mods="$out/modules.config"
  : > "$frag_mods"
  for name in $(module_names); do echo "CONFIG_$(module_sym "$name")=m" >> "$frag_mods"; done
  xz -dc "$CONFIG_XZ" > "$tree/.config"
  (cd "$tree" && ./scripts/kconfig/merge_config.sh -m .config "$here/lab.config" "$here/deb/vm.config" \
    "$frag_mods" > "$out/merge.log" 2>&1) || { cat "$out/merge.log" >&2; die "merge_config failed"; }
  make -C "$tree" -s olddefconfig >&2
  check_config "$here/lab.config" "$here/deb/vm.config" "$frag_mods"
  local rel
  rel="$(make -C "$tree" -s --no-print-directory kernelrelease)"
  [ "$rel" = "$LAB_RELEASE" ] || die "kernel release is $rel, expected $LAB_RELEASE"

  # bindeb-pkg's first step: the debian/ packaging, then what dpkg-buildpackage would need
  rm -rf "$tree/debian"
  make -C "$tree" -s include/config/kernel.release >&2
  KDEB_PKGVERSION="$pkgversion" make -C "$tree" -s run-command \
    KBUILD_RUN_COMMAND='$(srctree)/scripts/package/mkdebian' >&2
  local pkgs missing
  pkgs="$(cd "$tree" && dh_listpackages | sort | tr '\n' ' ')"
  for p in "linux-image-$LAB_RELEASE" "linux-headers-$LAB_RELEASE"; do
    [[ " $pkgs " == *" $p "* ]] || die "packaging lacks $p (has: $pkgs)"
  done
  missing="$(cd "$tree" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p')" || true
  if [ -n "$missing" ]; then
    # strip version constraints and build profiles: "a (>= 1) <!x> b:native" -> "a b"
    # shellcheck disable=SC2046  # one word per package
    apt_install $(echo "$missing" | sed 's/([^)]*)//g; s/<[^>]*>//g; s/:native//g; s/|[^ ]*//g')
    (cd "$tree" && dpkg-checkbuilddeps) || die "build dependencies still unmet"
  fi
  log "packaging: $pkgs(version $pkgversion); build dependencies met"
}

dry_run() {
  prepare
  # our modules compile in tree with this config (prepares the tree as a build would)
  local objs=() name
  for name in $(module_names); do objs+=("net/ipv4/tcp_$name.o"); done
  log "compiling ${objs[*]} in tree"
  local blog="$out/dry-run-compile.log"
  if ! make -C "$tree" -j"$jobs" "${objs[@]}" > "$blog" 2>&1; then cat "$blog" >&2; die "in-tree compile failed"; fi
  if grep -i "warning:" "$blog" >&2; then die "in-tree compile printed warnings"; fi
  for o in "${objs[@]}"; do [ -s "$tree/$o" ] || die "$o not built"; done
  log "dry run ok: $tree"
  echo "$out"
}

debs() { ls "$out"/linux-image-"$LAB_RELEASE"_*.deb "$out"/linux-headers-"$LAB_RELEASE"_*.deb 2>/dev/null; }

build() {
  init
  if [ -f "$out/BUILD_OK" ] && [ "$(debs | wc -l)" -eq 2 ]; then
    log "cached ($hash): $(cat "$out/BUILD_OK")"
    debs
    return 0
  fi
  prepare
  local start free
  free="$(df -Pm "$out" | awk 'NR==2 {print $4}')"
  [ "$free" -ge 12000 ] || log "warning: only ${free} MiB free under $out; a build needs about 12 GiB"
  start=$(date +%s)
  log "make bindeb-pkg with $jobs jobs (version $pkgversion)"
  rm -f "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
  make -C "$tree" -j"$jobs" KDEB_PKGVERSION="$pkgversion" bindeb-pkg > "$out/build.log" 2>&1 \
    || { tail -40 "$out/build.log" >&2; die "bindeb-pkg failed (log: $out/build.log)"; }
  # bindeb-pkg writes the packages next to the tree
  local secs=$(( $(date +%s) - start ))
  [ "$(debs | wc -l)" -eq 2 ] || die "bindeb-pkg made no image/headers packages (log: $out/build.log)"
  {
    echo "built $(date -u +%FT%TZ) in $secs s with $jobs jobs from linux-source-6.12=$DEB_VERSION;"
    for f in "$out"/*.deb; do echo " $(basename "$f") $(du -k "$f" | cut -f1) KiB"; done
  } | tr '\n' ' ' > "$out/BUILD_OK"
  echo >> "$out/BUILD_OK"
  log "$(cat "$out/BUILD_OK")"
  if [ "${KEEP_TREE:-0}" != 1 ]; then
    log "tree kept for size: $(du -sh "$tree" | cut -f1); removing it (KEEP_TREE=1 keeps it)"
    rm -rf "$tree"
  fi
  debs
}

install_debs() {
  build >/dev/null
  [ "$(id -u)" -eq 0 ] || die "install needs root"
  local files
  mapfile -t files < <(debs)
  log "installing ${files[*]}"
  DEBIAN_FRONTEND=noninteractive dpkg -i "${files[@]}" >&2
  [ -e "/boot/vmlinuz-$LAB_RELEASE" ] && [ -f "/boot/config-$LAB_RELEASE" ] \
    || die "/boot/vmlinuz-$LAB_RELEASE or /boot/config-$LAB_RELEASE missing after install"
  [ -d "/lib/modules/$LAB_RELEASE/build" ] || die "no /lib/modules/$LAB_RELEASE/build after install"
  for name in $(module_names); do
    modinfo -k "$LAB_RELEASE" -n "tcp_$name" >/dev/null || die "tcp_$name not installed for $LAB_RELEASE"
  done
  log "installed $LAB_RELEASE"
}

case "${1:-}" in
  dry-run) dry_run ;;
  build) build ;;
  install) install_debs ;;
  --hash) input_hash ;;
  --path) echo "$cache/kernel/deb-$(input_hash)" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
