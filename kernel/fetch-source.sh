#!/usr/bin/env bash
# Fetches the Debian linux-source package of a kernel series pinned in
# kernel/sources/<series> into the cache, without installing it and without
# touching the system's apt configuration: a private sources list, state and
# cache dir under the cache ($cache/apt/<suite>), `apt-get download`, then
# `dpkg-deb -x`. Prints the path of the source tarball on its last line.
#
#   kernel/fetch-source.sh 7.3            the pinned VERSION (from the cache if fetched before)
#   kernel/fetch-source.sh 7.3 --repin    the newest 7.3.x in the suite; rewrites VERSION/SHA256
#   kernel/fetch-source.sh 7.3 --check    only say whether the pinned VERSION is still in the suite
#
# The pinned point release, once fetched, stays in the cache (.deb and
# tarball), so a build keeps working after the suite has dropped it. On a
# fresh machine after the suite moved on, the fetch fails with the versions
# the suite has and the --repin command: the kernel binary is an input of
# the lab's determinism (docs/determinism.md), so it never changes silently.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${TORTOISE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tortoiselab}"
series="${1:?usage: fetch-source.sh <series> [--repin|--check]}"
mode="${2:-}"
pin="$here/sources/$series"
[ -f "$pin" ] || { echo "fetch-source: no pin file $pin" >&2; exit 1; }
# shellcheck disable=SC1090
SERIES= PACKAGE= MIRROR= SUITE= KEYRING= VERSION= SHA256=
eval "$(grep -E '^[A-Z0-9_]+=' "$pin")"
[ "$SERIES" = "$series" ] || { echo "fetch-source: $pin pins series '$SERIES', not $series" >&2; exit 1; }

srcdir="$cache/src"
mkdir -p "$srcdir"
deb_of() { echo "$srcdir/${PACKAGE}_${1//:/%3a}_all.deb"; }
tar_of() { echo "$srcdir/${PACKAGE}_$1/usr/src/$PACKAGE.tar.xz"; }

extract() {  # version -> tarball path
  local deb tarball d
  deb="$(deb_of "$1")"; tarball="$(tar_of "$1")"
  if [ ! -f "$tarball" ]; then
    d="$srcdir/${PACKAGE}_$1"
    rm -rf "$d.tmp"; dpkg-deb -x "$deb" "$d.tmp"; rm -rf "$d"; mv "$d.tmp" "$d"
  fi
  echo "$tarball"
}

if [ "$mode" = "" ] && [ -f "$(deb_of "$VERSION")" ] \
   && echo "$SHA256  $(deb_of "$VERSION")" | sha256sum -c --status; then
  echo "fetch-source: $PACKAGE=$VERSION (cached)" >&2
  extract "$VERSION"; exit 0
fi

apt_dir="$cache/apt/$SUITE"
mkdir -p "$apt_dir/etc/preferences.d" "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" > "$apt_dir/etc/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/etc/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::Etc::preferencesparts=$apt_dir/etc/preferences.d" -o "Dir::State=$apt_dir/state"
          -o "Dir::State::status=/dev/null" -o "Dir::Cache=$apt_dir/cache" -o "APT::Sandbox::User=root"
          -o "Debug::NoLocking=1")
echo "fetch-source: apt-get update ($SUITE, private lists in $apt_dir)" >&2
apt-get -q "${apt_opts[@]}" update >&2
# every version of the package in the suite, newest first, restricted to the series
mapfile -t versions < <(apt-cache "${apt_opts[@]}" madison "$PACKAGE" | awk -F'|' '{gsub(/ /,"",$2); print $2}' \
  | grep -E "^${SERIES//./\\.}\.[0-9]+-" | sort -rV | uniq)
if [ "${#versions[@]}" -eq 0 ]; then
  echo "fetch-source: $SUITE has no $PACKAGE ${SERIES}.x" >&2; exit 1
fi
newest="${versions[0]}"

case "$mode" in
  --check)
    if printf '%s\n' "${versions[@]}" | grep -qxF "$VERSION"; then
      echo "fetch-source: pinned $PACKAGE=$VERSION is in $SUITE (newest $newest)"; exit 0
    fi
    echo "fetch-source: pinned $PACKAGE=$VERSION is gone from $SUITE; it has: ${versions[*]}"; exit 3 ;;
  --repin) want="$newest" ;;
  "")
    if ! printf '%s\n' "${versions[@]}" | grep -qxF "$VERSION"; then
      echo "fetch-source: pinned $PACKAGE=$VERSION is gone from $SUITE (it has: ${versions[*]})." >&2
      echo "fetch-source: run 'kernel/fetch-source.sh $SERIES --repin' to move the pin to $newest" >&2
      exit 3
    fi
    want="$VERSION" ;;
  *) echo "fetch-source: unknown option $mode" >&2; exit 2 ;;
esac

( cd "$apt_dir/cache/archives/partial" && apt-get -q "${apt_opts[@]}" download "$PACKAGE=$want" >&2 )
got="$(ls "$apt_dir/cache/archives/partial/${PACKAGE}_"*"_all.deb" | head -1)"
sum="$(sha256sum "$got" | cut -d' ' -f1)"
if [ "$want" = "$VERSION" ] && [ "$sum" != "$SHA256" ]; then
  rm -f "$got"; echo "fetch-source: $PACKAGE=$want: sha256 $sum, pinned $SHA256" >&2; exit 1
fi
mv "$got" "$(deb_of "$want")"
if [ "$want" != "$VERSION" ]; then
  sed -i -e "s/^VERSION=.*/VERSION=$want/" -e "s/^SHA256=.*/SHA256=$sum/" "$pin"
  echo "fetch-source: pin moved $VERSION -> $want in $pin (commit it)" >&2
fi
echo "fetch-source: $PACKAGE=$want fetched" >&2
extract "$want"
