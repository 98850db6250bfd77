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
# vagrant-libvirt's halt and destroy look for it.
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

for pidf in "${pidfiles[@]}"; do
  [ -f "$pidf" ] && [ ! -L "$pidf" ] || { say "skipped $pidf: not a regular file"; continue; }
  port="${pidf##*/ssh_}"; port="${port%.pid}"
  pid="$(tr -dc '0-9' <"$pidf")"
  [ -n "$pid" ] || { say "skipped $pidf: no pid in it"; continue; }
  if [ ! -r "/proc/$pid/cmdline" ] || [ "$(stat -c %u "/proc/$pid")" != "$(id -u)" ]; then
    say "port $port: the recorded tunnel (pid $pid) no longer runs or is not this user's; vagrant reload starts it again"
    continue
  fi
  mapfile -d '' argv <"/proc/$pid/cmdline"
  fwd=""
  for ((i = 0; i + 1 < ${#argv[@]}; i++)); do
    [ "${argv[i]}" = -L ] && fwd="${argv[i + 1]}"
  done
  if [ "${argv[0]##*/}" != ssh ] || [[ ! "$fwd" =~ ^[^:]*:${port}: ]]; then
    say "port $port: pid $pid is not the recorded ssh tunnel (${argv[*]:0:3} ...); left alone"
    continue
  fi
  log="$(ls "${pidf%/pids/*}"/logs/ssh-forwarding-*_"$port"-*.log 2>/dev/null | head -1)"
  log="${log:-/dev/null}"
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  setsid "${argv[@]}" >>"$log" 2>&1 </dev/null &
  new=$!
  echo "$new" >"$pidf"
  sleep 2
  if kill -0 "$new" 2>/dev/null; then
    say "port $port: tunnel to ${fwd#*:${port}:} started again (pid $new, was $pid)"
  else
    say "port $port: the new tunnel stopped at once; its log: $log"; tail -5 "$log" >&2 || true
    exit 1
  fi
done
