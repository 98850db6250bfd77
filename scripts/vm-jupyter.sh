#!/usr/bin/env bash
# Jupyter in the course VM, reached from the host as docs/course-labs.md
# ("Jupyter from the host") tells a student to: in the VM, as root,
# `NOTEBOOK_IP=0.0.0.0 make notebook` in /vagrant; on the host, the port
# forwarded to the VM's 8888, on 127.0.0.1. Through that port it fetches
# JupyterLab's page and runs a cell in a new kernel (it must be the venv's
# python, importing the project), checks that the API wants the token, then
# stops the server by the process group it recorded in the VM.
#
#   scripts/vm-jupyter.sh libvirt|qemu    the VM of this clone, up and provisioned
#
# `make vm-test` runs it as its `jupyter` step. Settings: TORTOISE_JUPYTER_PORT
# (the Vagrantfile's host port, 8888; on plain qemu, scripts/vm-qemu.sh
# records the port it took), TORTOISE_JUPYTER_WAIT (600 s: under software
# emulation JupyterLab takes a minute or more to start).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
wait_s="${TORTOISE_JUPYTER_WAIT:-600}"
say() { echo "vm-jupyter: $*"; }
die() { echo "vm-jupyter: FAILED: $*" >&2; exit 1; }

case "${1:-}" in
  libvirt)
    vssh() { vagrant ssh -c "$1" </dev/null; }
    # vagrant-libvirt forwards with an ssh tunnel per port and has neither
    # auto_correct nor `vagrant port`: the port is the Vagrantfile's, and
    # the tunnel's pid file says whether it runs
    host_port() {
      local p="${TORTOISE_JUPYTER_PORT:-8888}" tunnel_pidf
      tunnel_pidf="$(ls .vagrant/machines/*/libvirt/pids/ssh_"$p".pid 2>/dev/null | head -1)"
      [ -n "$tunnel_pidf" ] && kill -0 "$(cat "$tunnel_pidf")" 2>/dev/null \
        || die "no port forward to the VM's 8888 runs on 127.0.0.1:$p (taken by something else? TORTOISE_JUPYTER_PORT=<free port> vagrant reload)"
      echo "$p"
    } ;;
  qemu)
    vssh() { bash scripts/vm-qemu.sh ssh -c "$1" </dev/null; }
    host_port() { bash scripts/vm-qemu.sh port 8888; } ;;
  *) echo "usage: scripts/vm-jupyter.sh libvirt|qemu" >&2; exit 2 ;;
esac

log=/tmp/tortoiselab-jupyter.log
# in the VM: the server's process group "PGID START BOOT_ID", its leader's start time
# (field 22 of /proc/PGID/stat) and the VM's boot id taken at launch; the group is
# signalled only while they match (a record kept across a reboot of the VM, its /tmp on
# disk, names no server: scripts/procid.sh does the same on the host)
pidf=/tmp/tortoiselab-jupyter.pgid
ours="test -f $pidf && read p s b < $pidf && set -- \$(cat /proc/\$p/stat 2>/dev/null) && [ \"\${22:-}\" = \"\$s\" ] && [ \"\$b\" = \"\$(cat /proc/sys/kernel/random/boot_id)\" ]"
stop_server() {
  vssh "sudo sh -c '$ours && kill -TERM -\$p 2>/dev/null; rm -f $pidf'" || true
}
trap stop_server EXIT

port="$(host_port)"
say "the VM's Jupyter port 8888 is forwarded to 127.0.0.1:$port"
# as the handout says, in a process group of its own whose id is recorded (setsid: the
# shell is the group's leader, then it becomes make)
vssh "sudo sh -c 'cd /vagrant && rm -f $log && NOTEBOOK_IP=0.0.0.0 setsid sh -c \"set -- \\\$(cat /proc/\\\$\\\$/stat); echo \\\$\\\$ \\\${22} \\\$(cat /proc/sys/kernel/random/boot_id) > $pidf; exec make notebook\" >$log 2>&1 </dev/null &'"
t0=$(date +%s)
token=""
until [ -n "$token" ]; do
  sleep 5
  token="$(vssh "sudo grep -o -m1 'token=[0-9a-f]*' $log" 2>/dev/null | tr -d '\r' | head -1 | cut -d= -f2 || true)"
  if [ -z "$token" ]; then
    vssh "sudo sh -c '$ours && kill -0 -\$p'" >/dev/null 2>&1 \
      || { vssh "sudo tail -20 $log" || true; die "make notebook stopped before it printed its token"; }
    [ $(( $(date +%s) - t0 )) -lt "$wait_s" ] || die "no token in ${wait_s} s (its log in the VM: $log)"
  fi
done
say "JupyterLab started in the VM in $(( $(date +%s) - t0 )) s"

# what a failure through the port found, on both sides: the VM's listening sockets,
# the host's listener on the port, and on libvirt the tunnel (its process, its
# arguments, the end of its log), so the next failure explains itself
diagnose() {
  echo "--- in the VM: listening TCP sockets (ss -ltnp)"
  vssh "sudo ss -ltnp" 2>&1 | tr -d '\r' || true
  echo "--- on the host: what listens on 127.0.0.1:$port"
  ss -ltnp "sport = :$port" 2>&1 || true
  local pidf log
  for pidf in .vagrant/machines/*/libvirt/pids/ssh_"$port".pid; do
    [ -f "$pidf" ] || continue
    echo "--- the forward's tunnel ($pidf: pid $(cat "$pidf"))"
    ps -o pid,lstart,args -p "$(cat "$pidf")" 2>&1 || echo "(no such process)"
    for log in "${pidf%/pids/*}"/logs/ssh-forwarding-*_"$port"-*.log; do
      [ -f "$log" ] && { echo "--- $log (last 20 lines)"; tail -20 "$log"; }
    done
  done
}

base="http://127.0.0.1:$port"
page="$(curl -fsS --max-time 60 "$base/lab?token=$token")" \
  || { diagnose >&2; die "no page at $base/lab through the forwarded port (what was found is above)"; }
grep -q "JupyterLab" <<<"$page" || die "$base/lab is not JupyterLab's page"
say "$base/lab: JupyterLab's page, from the host"
# a cell in a new kernel, over the kernel's websocket as a browser runs it (src/tortoiselab/jupyter_api.py)
cell='import sys, tortoiselab.notebook as nb; print(sys.executable); print(nb.__file__)'
outputs="$("$here/.venv/bin/python" -m tortoiselab.jupyter_api "$base" "$token" "$cell" --timeout "$wait_s")" \
  || die "the cell failed in the VM's kernel: $outputs"
say "a cell ran in a kernel of the VM's Jupyter: $(tr '\n' ' ' <<<"$outputs")"
grep -q '/vagrant/.venv/bin/python' <<<"$outputs" || die "the VM's kernel is not the venv's python (/vagrant/.venv)"
grep -q '/vagrant/src/tortoiselab/' <<<"$outputs" || die "the VM's kernel does not import the project's tortoiselab"
code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$base/api/kernelspecs")"
[ "$code" = 403 ] || [ "$code" = 401 ] || die "$base/api/kernelspecs answered $code without the token (401 or 403 expected)"
say "without the token the API refuses ($code)"
stop_server
trap - EXIT
say "stopped the server (its process group in the VM)"
