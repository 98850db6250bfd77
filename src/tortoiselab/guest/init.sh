#!/bin/sh
# PID 1 of the UML lab guest. The host tree is the guest's root, read-only
# (hostfs, `ro`); this script gives the guest private writable scratch space
# (tmpfs over /tmp, /run, /var/log, /var/lib, /var/tmp), mounts the run's work
# folder read-write, runs the lab task with the project's Python, and powers
# the guest off. It never writes to the host outside TL_WORK.
#
# The kernel passes TL_PYTHON and TL_RO from its command line. The run's
# work folder (TL_WORK) is the UML process's working directory on the host,
# read here through the host's /proc (hostfs) before the guest mounts its
# own: it differs from boot to boot, and the kernel mixes its command line
# into its random pool (docs/determinism.md).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# PYTHONHASHSEED: the same set/dict iteration order in every run (docs/determinism.md)
export HOME=/tmp PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8 PYTHONHASHSEED=0
# Mininet imports distutils.version; setuptools' shim (the venv's
# distutils-precedence.pth) would answer with its own copy and pull in
# setuptools and pkg_resources: 154 more modules read through hostfs at every
# boot (docs/speed.md, "Issue 52"). Where the interpreter's standard library
# still has distutils (before Python 3.12), it answers instead.
py_real="$(readlink -f "$TL_PYTHON")"
[ -f "${py_real%/bin/*}/lib/${py_real##*/}/distutils/version.py" ] && export SETUPTOOLS_USE_DISTUTILS=stdlib
TL_WORK="${TL_WORK:-$(readlink /proc/self/cwd)}"
case "$TL_WORK" in
  /?*) export TL_WORK ;;
  *) echo "tortoise-guest: cannot find the work folder (host /proc/self/cwd: '$TL_WORK')"; exec "$TL_PYTHON" -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)' ;;
esac

mount -t proc proc /proc
# no address-space randomization: thread ids and pointer-keyed hashes (Open
# vSwitch seeds its draws with pthread_self) repeat run to run (docs/determinism.md)
echo 0 > /proc/sys/kernel/randomize_va_space
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm 2>/dev/null
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
for d in /run /var/log /var/lib; do mount -t tmpfs -o mode=755 tmpfs "$d"; done
mkdir -p /run/lock && chmod 1777 /run/lock
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
# host folders the guest must read that the tmpfs mounts above hid, e.g. a
# clone under /tmp: read-only again. $1: a colon-separated list.
mount_ro() {
  IFS_SAVE="$IFS"; IFS=:
  for p in $1; do
    if [ -n "$p" ] && [ ! -e "$p" ]; then
      mkdir -p "$p" && mount -t hostfs -r -o "$p" hostfs "$p"
    fi
  done
  IFS="$IFS_SAVE"
}
mount_ro "$TL_RO"  # the project, its venv, our modules: the same in every boot
# the work folder at one fixed path in every boot (host/guestpaths.py
# GUEST_WORK), never at its host path: the guest's path lookups cost virtual
# time by the component (e.g. mount(8) canonicalizes its source with a failing
# readlink per component), so a run stored under results/ and its rerun under
# a folder of another depth or place parted by microseconds, boot timing and
# CRNG included (docs/determinism.md). The host maps the paths back.
W=/run/tortoise-work
mkdir -p "$W"
mount -t hostfs -o "$TL_WORK" hostfs "$W"
# the run's own read-only folders (e.g. the experiment's site and PKI): from
# a file, not the command line, as they differ from results folder to folder;
# the i-th at /run/tortoise-ro/i (host/guestpaths.py GUEST_RO), where the
# request names them, for the reason the work folder has a fixed path
if [ -s "$W/ro_paths" ]; then
  IFS_SAVE="$IFS"; IFS=:; i=0
  for p in $(cat "$W/ro_paths"); do
    mkdir -p "/run/tortoise-ro/$i" && mount -t hostfs -r -o "$p" hostfs "/run/tortoise-ro/$i"
    i=$((i + 1))
  done
  IFS="$IFS_SAVE"
fi
# the kernel's CRNG from the run's seed, before anything draws from it
"$TL_PYTHON" -S "$(dirname "$0")/../tools/crng_seed.py" "$W/request.json" ||
  echo "tortoise-guest: could not seed the CRNG; this run's kernel random numbers are not the seed's"
hostname tortoise-lab
ip link set lo up

echo "tortoise-guest: kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime) s"
"$TL_PYTHON" -m tortoiselab.guest "$W/request.json"
echo "tortoise-guest: task exited with $?"
# sync, then power off (LINUX_REBOOT_CMD_POWER_OFF): the UML process exits.
# Python without site (-S): its start is most of the boot's last step
exec "$TL_PYTHON" -S -c 'import ctypes, os; os.sync(); ctypes.CDLL(None).reboot(0x4321FEDC)'
