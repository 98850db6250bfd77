#!/usr/bin/env bash
# `make vm-test`: the course VM booted for real, as course staff would.
#
#   1. host packages (scripts/setup-vm.sh) and the Debian 12 box built here
#      from Debian's packages (scripts/vm-box.sh, cached by its inputs' hash)
#   2. the hypervisor: libvirtd (started here if nothing runs it), and KVM
#      only if a guest actually runs on it, else software emulation (TCG).
#      Where libvirtd cannot run, the path is plain qemu over ssh
#      (scripts/vm-qemu.sh: the same box, steps and /vagrant); the table
#      says which path was taken
#   3. `vagrant up --provider=libvirt --no-provision`, then the Vagrantfile's
#      own provisioners one by one (`vagrant provision --provision-with`),
#      so that each is timed: bootstrap, setup, kernel, reboot, verify
#      (on plain qemu: `scripts/vm-qemu.sh up`, then `provision STEP`)
#   4. the VM's kernel: every algorithm (ours included) and netem
#   5. `sudo make -C /vagrant experiment` in the VM: the native backend, no
#      UML lab kernel built
#   6. the results copied out as docs/course-labs.md says (rsync over `vagrant ssh-config`)
#   7. Jupyter in the VM reached from the host on the forwarded port, as
#      docs/course-labs.md says: its page, and a cell run in a kernel of the
#      venv (scripts/vm-jupyter.sh)
#   8. `vagrant destroy`
#
# Each step prints its wall time; a table of them closes the run. Settings:
# TORTOISE_VM_CPUS (default 2 here), TORTOISE_VM_MEMORY (4096),
# TORTOISE_VM_TEST_OUT (build/vm-test: logs and the copied results),
# TORTOISE_VM_KEEP=1 (leave the VM running at the end, for a look inside),
# TORTOISE_VM_TEST_FROM=<step> (with a VM kept from an earlier run: skip the
# steps before that one, e.g. provision-verify), TORTOISE_VM_PATH (auto:
# libvirt where libvirtd runs, else qemu; or libvirt, or qemu to take that
# path).
set -uo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
out="${TORTOISE_VM_TEST_OUT:-$here/build/vm-test}"
mkdir -p "$out"
rm -f "$out"/*.pid "$out"/*.id
# shellcheck source=scripts/procid.sh
. "$here/scripts/procid.sh"
[ -n "${TORTOISE_VM_TEST_FROM:-}" ] || rm -f "$out"/[0-9][0-9]-*.log
export TORTOISE_VM_CPUS="${TORTOISE_VM_CPUS:-2}" TORTOISE_VM_MEMORY="${TORTOISE_VM_MEMORY:-4096}"
export VAGRANT_DEFAULT_PROVIDER=libvirt
# the libvirt domain and its project folder are this clone's; nothing else is touched
export VAGRANT_CHECKPOINT_DISABLE=1

t_start=$(date +%s)
resume_from=""  # set before the VM's steps (the host's always run)
steps=()
started_daemons=()
vm_up=""

now() { date +%s; }
say() { echo "vm-test: $*"; }
fail() { say "FAILED: $*"; finish 1; }

# run one step: its name, then the command; output to the terminal and to
# $out/<n>-<name>.log; its wall time recorded
step() {
  local keep_going=""
  [ "$1" = --keep-going ] && { keep_going=1; shift; }
  local name="$1"; shift
  local n=$(( ${#steps[@]} + 1 ))
  local logf; logf="$out/$(printf %02d "$n")-$name.log"
  [ "$name" = "$resume_from" ] && resume_from=""
  if [ -n "$resume_from" ]; then  # TORTOISE_VM_TEST_FROM: done by an earlier run
    steps+=("$name|0|skip"); say "-- step $n: $name: skipped (TORTOISE_VM_TEST_FROM)"; return 0
  fi
  say "== step $n: $name =="
  local t0; t0=$(now)
  # (Vagrant's progress bars, one carriage return each, left out)
  "$@" 2>&1 | stdbuf -oL tr '\r' '\n' | grep --line-buffered -v -e 'Progress: [0-9]' -e '^\s*$' | tee "$logf"
  local rc=${PIPESTATUS[0]}
  local dt=$(( $(now) - t0 ))
  steps+=("$name|$dt|$rc")
  say "-- step $n: $name: $( [ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)" ) in ${dt} s"
  [ "$rc" -eq 0 ] || [ -n "$keep_going" ] || fail "step $name (log: $logf)"
  return "$rc"
}

table() {
  echo
  say "path: $path_taken; accelerator: $accel ($accel_why)"
  printf 'vm-test: %-24s %8s  %s\n' step "wall s" result
  local s name dt rc
  for s in "${steps[@]}"; do
    IFS='|' read -r name dt rc <<<"$s"
    printf 'vm-test: %-24s %8d  %s\n' "$name" "$dt" "$(case "$rc" in 0) echo passed;; skip) echo skipped;; *) echo FAILED;; esac)"
  done
  printf 'vm-test: %-24s %8d\n' total $(( $(now) - t_start ))
}

finish() {
  local rc="$1"
  if [ -n "$vm_up" ] && [ "${TORTOISE_VM_KEEP:-}" != 1 ]; then
    say "== destroying the VM ($( [ "$path_taken" = qemu ] && echo "scripts/vm-qemu.sh destroy" || echo "vagrant destroy")) =="
    local t0; t0=$(now)
    vm destroy >"$out/destroy.log" 2>&1 && steps+=("destroy|$(( $(now) - t0 ))|0") \
      || { steps+=("destroy|$(( $(now) - t0 ))|1"); rc=1; }
    vm_up=""
  fi
  if [ -n "$vm_up" ] && [ "${#started_daemons[@]}" -gt 0 ]; then
    # a kept VM needs libvirtd for vagrant ssh and destroy: left running, ours to stop by these pids
    say "the VM is kept; the daemons this test started are left running: kill $(for f in "${started_daemons[@]}"; do printf '%s ' "$(proc_pid "$f")"; done)after vagrant destroy"
  else
    # each only while it is the daemon this test started (scripts/procid.sh)
    for idf in "${started_daemons[@]}"; do proc_ours "$idf" && kill "$(proc_pid "$idf")" 2>/dev/null || true; done
  fi
  table | tee "$out/timings.txt"
  [ "$rc" -eq 0 ] && say "ok" || say "FAILED"
  exit "$rc"
}
trap 'fail "interrupted"' INT TERM

path_taken="${TORTOISE_VM_PATH:-auto}"
case "$path_taken" in auto|libvirt|qemu) ;; *) echo "vm-test: TORTOISE_VM_PATH must be auto, libvirt or qemu, not '$path_taken'" >&2; exit 2 ;; esac
accel="?"
accel_why="not probed yet"

step host-packages bash scripts/setup-vm.sh
step box bash scripts/vm-box.sh
box="$(tail -1 "$out/02-box.log")"
[ -f "$box" ] || fail "scripts/vm-box.sh named no box file"
export TORTOISE_BOX="$box"

# -- the hypervisor ----------------------------------------------------------
libvirt_ready() { virsh -c qemu:///system version >/dev/null 2>&1; }
start_libvirtd() {
  libvirt_ready && { say "libvirtd already running"; return 0; }
  if [ -d /run/systemd/system ]; then
    systemctl start libvirtd virtlogd
  else
    # no init system to start it (a container): run the daemons for this test only
    rm -f "$out/libvirtd.pid" "$out/virtlogd.pid" "$out/libvirtd.id" "$out/virtlogd.id"
    [ -S /run/libvirt/virtlogd-sock ] || virtlogd -d -p "$out/virtlogd.pid"
    libvirtd -d -p "$out/libvirtd.pid"
  fi
  for _ in $(seq 30); do libvirt_ready && break; sleep 1; done
  libvirt_ready || { say "libvirtd does not answer on qemu:///system"; return 1; }
  # what proves later that a pid is still the daemon started here (scripts/procid.sh)
  for f in libvirtd virtlogd; do
    [ -f "$out/$f.pid" ] && proc_record "$(cat "$out/$f.pid")" > "$out/$f.id"
  done
  true
  say "libvirtd started for this test (pids: $(for f in "$out"/*.pid; do [ -f "$f" ] && printf '%s ' "$(cat "$f")"; done)or by systemd)"
}
probe_kvm() {
  # KVM is usable only if a guest runs on it: /dev/kvm opening (and
  # KVM_CREATE_VM working) is not enough where the outer hypervisor offers
  # no virtualization extensions. The box's own kernel must boot to its
  # root-mount panic (no initrd, no root), which reboots (panic=-1) and so
  # ends qemu (-no-reboot): seconds on KVM, half a minute under TCG.
  local dir; dir="$(dirname "$box")"
  if [ ! -e /dev/kvm ]; then accel=tcg; accel_why="no /dev/kvm"; return 0; fi
  if ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
    say "note: /proc/cpuinfo shows no vmx/svm; trying a KVM guest anyway"
  fi
  local t0; t0=$(now)
  timeout 45 qemu-system-x86_64 -accel kvm -m 256 -smp 1 -display none -serial "file:$out/kvm-probe.log" \
    -no-reboot -kernel "$dir/vmlinuz" -append "console=ttyS0 panic=-1 root=/dev/tortoise-none" \
    >"$out/kvm-probe.err" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q "Kernel panic" "$out/kvm-probe.log"; then
    accel=kvm; accel_why="a guest kernel boots on KVM ($(( $(now) - t0 )) s)"
  else
    accel=tcg
    accel_why="/dev/kvm is there but a guest does not run on it ($(grep -a -m1 -o 'KVM internal error[^.]*' "$out/kvm-probe.err" || echo "no boot within 45 s, exit $rc")); software emulation"
  fi
}
# the VM's commands on the path taken
vm() {
  case "$path_taken:$1" in
    libvirt:up) vagrant up --provider=libvirt --no-provision ;;
    libvirt:provision) vagrant provision --provision-with "$2" ;;
    libvirt:ssh) vagrant ssh -c "$2" </dev/null ;;
    libvirt:ssh-config) vagrant ssh-config ;;
    libvirt:destroy) vagrant destroy -f ;;
    qemu:ssh) bash scripts/vm-qemu.sh ssh -c "$2" </dev/null ;;
    qemu:*) bash scripts/vm-qemu.sh "$@" ;;
  esac
}
hypervisor() {
  if [ "$path_taken" = qemu ]; then echo "vm-test path: qemu (TORTOISE_VM_PATH=qemu)"; return 0; fi
  if start_libvirtd; then echo "vm-test path: libvirt"; return 0; fi
  [ "$path_taken" = auto ] || return 1
  echo "vm-test path: qemu (libvirtd cannot run here)"
}
step hypervisor hypervisor
path_taken="$(sed -n 's/^vm-test path: \([a-z]*\).*/\1/p' "$out/$(printf %02d ${#steps[@]})-hypervisor.log" | tail -1)"
[ -n "$path_taken" ] || fail "the hypervisor step chose no path"
# the daemons that step started (in a subshell: their pid files) are this test's to stop
for f in libvirtd virtlogd; do [ -f "$out/$f.id" ] && started_daemons+=("$out/$f.id"); done
probe_kvm
say "accelerator: $accel ($accel_why)"
if [ "$accel" = kvm ]; then export TORTOISE_VM_DRIVER=kvm; else export TORTOISE_VM_DRIVER=qemu; fi

# -- the VM --------------------------------------------------------------------
vm_up=1
resume_from="${TORTOISE_VM_TEST_FROM:-}"
step "up" vm up
for p in bootstrap setup kernel reboot verify; do
  step "provision-$p" vm provision "$p"
done

check_kernel() {
  vm ssh 'uname -r; echo "available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)";
    lsmod | grep -E "^(sch_netem|tcp_cubic_plus|tcp_reno_beta) " || true'
}
step kernel-algorithms check_kernel
avail=" $(grep '^available:' "$out/$(printf %02d ${#steps[@]})-kernel-algorithms.log" | cut -d: -f2 | tr -d '\r') "
algos=(reno cubic bic westwood htcp highspeed hybla vegas nv scalable lp veno yeah illinois dctcp cdg bbr)
for m in kernel/modules/tcp_*.c; do m="$(basename "$m" .c)"; algos+=("${m#tcp_}"); done
missing=()
for a in "${algos[@]}"; do [[ "$avail" == *" $a "* ]] || missing+=("$a"); done
[ "${#missing[@]}" -eq 0 ] || fail "the VM's kernel lacks: ${missing[*]}"
grep -q '^sch_netem ' "$out/$(printf %02d ${#steps[@]})-kernel-algorithms.log" || fail "sch_netem is not loaded in the VM"
say "the VM's kernel has all ${#algos[@]} algorithms (ours: ${algos[*]: -2}) and sch_netem"

# docs/course-labs.md, "Getting results out" (on plain qemu: scripts/vm-qemu.sh ssh-config in place of vagrant's)
copy_results() {
  vm ssh-config > .vagrant/ssh-config &&
  rm -rf "$out/results" &&
  rsync -a --exclude=.lab/ -e "ssh -F .vagrant/ssh-config" default:/vagrant/results/ "$out/results/" &&
  ls -l "$out/results/quick"
}
# A failed experiment (e.g. runs stored "disturbed": a real clock in a VM
# under software emulation on a busy host) fails the test, but the steps
# after it still run: their results are copied out and the student's
# Jupyter path is tried, so one failure does not hide the next.
step --keep-going experiment vm ssh 'sudo -i make -C /vagrant experiment'
exp_rc=$?
explog="$out/$(printf %02d ${#steps[@]})-experiment.log"
[ "$exp_rc" -eq 0 ] || say "make experiment FAILED (exit $exp_rc; log: $explog); the steps after it still run"
grep -q "lab-kernel: not building the UML lab kernel" "$explog" || fail "make experiment did not skip the UML lab kernel"
grep -Eiq "backend[: ]+native" "$explog" || fail "make experiment did not say it ran on the native backend"
uml="$(vm ssh 'sudo ls -d /root/.cache/tortoiselab/kernel 2>/dev/null | wc -l' | tr -d '\r')"
[ "$uml" = 0 ] || fail "the VM has a UML kernel cache: something built the lab kernel"
say "make experiment ran on the native backend; no UML lab kernel in the VM"

step results-out copy_results
[ -f "$out/results/quick/runs.parquet" ] || fail "no results/quick/runs.parquet copied out"
"$here/.venv/bin/python" - "$out/results/quick" <<'EOF' || fail "the copied results are not whole native runs"
import sys, pandas as pd
runs = pd.read_parquet(f"{sys.argv[1]}/runs.parquet")
cols = [c for c in runs.columns if c.endswith("backend")]
print(f"vm-test: {len(runs)} runs copied out; columns {cols}: {sorted(set(runs[cols[0]]))}" if cols else
      f"vm-test: {len(runs)} runs; no backend column")
sys.exit(0 if cols and set(runs[cols[0]]) == {"native"} and len(runs) > 0 else 1)
EOF

step --keep-going jupyter bash scripts/vm-jupyter.sh "$path_taken"
jup_rc=$?
[ "$exp_rc" -eq 0 ] && [ "$jup_rc" -eq 0 ] && finish 0
fail "$( [ "$exp_rc" -ne 0 ] && echo "step experiment (log: $explog)" )$( [ "$exp_rc" -ne 0 ] && [ "$jup_rc" -ne 0 ] && echo "; " )$( [ "$jup_rc" -ne 0 ] && echo "step jupyter" )"
