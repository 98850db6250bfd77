#!/usr/bin/env bash
# Restart vagrant-libvirt's port forwards of the course VM after a reboot.
#
#   scripts/vm-forward.sh [PROJECT_DIR]     (the Vagrantfile's trigger after up and provision)
#
# vagrant-libvirt forwards a port with an ssh tunnel it starts once, at `up`
# (`ssh -n -L <host_ip>:<port>:<vm_ip>:<guest_port> -N <vm_ip>`, its pid in
# .vagrant/machines/<vm>/libvirt/pids/ssh_<port>.pid, its output in
# .../libvirt/logs/ssh-forwarding-*.log). The provisioning reboots the VM
# (the Vagrantfile's "reboot" step): the tunnel's ssh connection dies with the
# VM's first kernel, but the ssh process does not know it until it sends
# something, so it keeps the host's port open and resets the first connection
# through it (curl: "(56) Recv failure: Connection reset by peer", the
# student's JupyterLab unreachable; issue 41). Each recorded tunnel is
# started again with its very command line, and its new pid recorded where
# vagrant-libvirt's halt and destroy look for it. A tunnel may also exit
# when the VM shuts down cleanly (its connection closed): `make vm-test`
# saw the tunnel gone after the provisioning reboot. So each tunnel's
# command line is kept (.vagrant/tortoiselab/forward-<machine>-<port>.argv,
# NUL-separated, written when the tunnel is seen running) and a tunnel that
# no longer runs is started from it.
#
# A pid file is only a number: a tunnel is ended only when the process of
# that pid is this user's ssh with the recorded port's -L forward on its
# command line; anything else is left alone and named. Tunnels run through
# sudo (host ports <= 1024) are left alone. Exit 0 when there is nothing to
# do (no libvirt VM here: the plain qemu path forwards in QEMU itself, which
# survives reboots).
set -euo pipefail

dir="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
say() { echo "vm-forward: $*"; }

shopt -s nullglob
pidfiles=("$dir"/.vagrant/machines/*/libvirt/pids/ssh_*.pid)
[ "${#pidfiles[@]}" -gt 0 ] || exit 0

# the tunnel's -L forward in argv, or "" (argv: the array named by $1)
forward_of() {
  local -n a="$1"; local i f=""
  for ((i = 0; i + 1 < ${#a[@]}; i++)); do [ "${a[i]}" = -L ] && f="${a[i + 1]}"; done
  echo "$f"
}
# an argv is a tunnel of this port: ssh with a -L forward of the port
is_tunnel() {
  local -n b="$1"; local f; f="$(forward_of "$1")"
  [ "${#b[@]}" -gt 0 ] && [ "${b[0]##*/}" = ssh ] && [[ "$f" =~ ^[^:]*:${2}: ]]
}

keep="$dir/.vagrant/tortoiselab"
for pidf in "${pidfiles[@]}"; do
  [ -f "$pidf" ] && [ ! -L "$pidf" ] || { say "skipped $pidf: not a regular file"; continue; }
  port="${pidf##*/ssh_}"; port="${port%.pid}"
  machine="${pidf%/libvirt/pids/*}"; machine="${machine##*/}"
  saved="$keep/forward-$machine-$port.argv"
  pid="$(tr -dc '0-9' <"$pidf")"
  argv=()
  if [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && [ "$(stat -c %u "/proc/$pid")" = "$(id -u)" ]; then
    mapfile -d '' argv <"/proc/$pid/cmdline"  # empty for a process that has exited, not yet reaped
  fi
  if [ "${#argv[@]}" -gt 0 ]; then
    if ! is_tunnel argv "$port"; then
      say "port $port: pid $pid is not the recorded ssh tunnel (${argv[*]:0:3} ...); left alone"
      continue
    fi
    mkdir -p "$keep"
    [ ! -L "$saved" ] || { say "port $port: $saved is a link; left alone"; continue; }
    printf '%s\0' "${argv[@]}" >"$saved"
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    was="was $pid"
  elif [ -f "$saved" ] && [ ! -L "$saved" ] && [ "$(stat -c %u "$saved")" = "$(id -u)" ]; then
    mapfile -d '' argv <"$saved"
    if ! is_tunnel argv "$port"; then
      say "port $port: $saved holds no ssh tunnel of port $port; left alone"
      continue
    fi
    was="pid ${pid:-none} had exited; its command line from $saved"
  else
    say "port $port: the recorded tunnel (pid ${pid:-none}) no longer runs or is not this user's, and no command line of it is kept; vagrant reload starts it again"
    continue
  fi
  fwd="$(forward_of argv)"
  log="$(ls "${pidf%/pids/*}"/logs/ssh-forwarding-*_"$port"-*.log 2>/dev/null | head -1)"
  log="${log:-/dev/null}"
  setsid "${argv[@]}" >>"$log" 2>&1 </dev/null &
  new=$!
  echo "$new" >"$pidf"
  sleep 2
  if kill -0 "$new" 2>/dev/null; then
    say "port $port: tunnel to ${fwd#*:${port}:} started again (pid $new, $was)"
  else
    say "port $port: the new tunnel stopped at once; its log: $log"; tail -5 "$log" >&2 || true
    exit 1
  fi
done
