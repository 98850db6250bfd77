#!/usr/bin/env bash
# Tortoise Lab: the course VM on plain qemu over ssh, for a machine where
# libvirtd cannot run (a container without its privileges, a cluster node).
# The same box (scripts/vm-box.sh), the same provisioning steps as the
# Vagrantfile's provisioners, the same /vagrant folder, copied in by rsync
# with the Vagrantfile's excludes; only the hypervisor differs.
#
#   scripts/vm-qemu.sh up                 boot the box (a copy-on-write overlay), wait for ssh,
#                                         put in a key of this VM's own, copy the project to /vagrant
#   scripts/vm-qemu.sh provision STEP     one provisioning step, as root: bootstrap setup kernel
#                                         reboot verify (the Vagrantfile's, in its order)
#   scripts/vm-qemu.sh ssh [-c CMD]       a shell in the VM as vagrant (or run CMD)
#   scripts/vm-qemu.sh rsync              copy the project in again (what `vagrant rsync` does)
#   scripts/vm-qemu.sh ssh-config         the ssh_config of the VM (Host default), as `vagrant ssh-config`
#   scripts/vm-qemu.sh port GUEST         the host port forwarded to the VM's GUEST port (22 or 8888),
#                                         as `vagrant port --guest GUEST`
#   scripts/vm-qemu.sh destroy            stop the VM (by its recorded pid) and delete its overlay
#
# State lives in .vagrant/qemu/ of this clone (the disk overlay, the key,
# qemu's pid, the ssh port). Settings: TORTOISE_BOX (the .box file;
# default: the cached one scripts/vm-box.sh builds), TORTOISE_VM_CPUS (2),
# TORTOISE_VM_MEMORY (4096), TORTOISE_VM_DRIVER (kvm or qemu, as for the
# Vagrantfile: software emulation with a Nehalem CPU, docs/vm.md),
# TORTOISE_VM_KERNEL (fast), TORTOISE_JUPYTER_PORT (8888, forwarded on
# 127.0.0.1). Networking is qemu's user mode: the VM reaches the host's
# network through qemu, and the host reaches the VM only at the forwarded
# ports, on 127.0.0.1.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
state="$here/.vagrant/qemu"
PROJECT=/vagrant
# the Vagrantfile's provisioners, in its order (tests/unit/test_vm_qemu.py keeps the two lists equal)
STEPS=(bootstrap setup kernel reboot verify)
# the Vagrantfile's rsync__exclude
EXCLUDES=(/.vagrant/ /.venv/ /results/ /build/ /kernel/build/ /.pytest_cache/ "/src/*.egg-info/" __pycache__/)
CPUS="${TORTOISE_VM_CPUS:-2}"
MEMORY="${TORTOISE_VM_MEMORY:-4096}"
DRIVER="${TORTOISE_VM_DRIVER:-kvm}"
KERNEL="${TORTOISE_VM_KERNEL:-fast}"
JUPYTER_PORT="${TORTOISE_JUPYTER_PORT:-8888}"
BOOT_TIMEOUT=1800  # software emulation boots in minutes (the Vagrantfile's boot_timeout)

die() { echo "vm-qemu: $*" >&2; exit 1; }
say() { echo "vm-qemu: $*"; }
case "$DRIVER" in kvm|qemu) ;; *) die "TORTOISE_VM_DRIVER must be kvm or qemu, not '$DRIVER'" ;; esac
case "$KERNEL" in fast|full) ;; *) die "TORTOISE_VM_KERNEL must be fast or full, not '$KERNEL'" ;; esac
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "TORTOISE_VM_CPUS must be a whole number of vCPUs, not '$CPUS'"
[[ "$MEMORY" =~ ^[0-9]+$ ]] && [ "$MEMORY" -ge 2048 ] || die "TORTOISE_VM_MEMORY: at least 2048 MiB, not '$MEMORY'"

ssh_opts() { echo "-F $state/ssh-config"; }
port_free() { python3 -c 'import socket,sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
vm_ssh() { ssh -F "$state/ssh-config" default "$@"; }
# qemu's pid is signalled only while it is the qemu this script started (scripts/procid.sh):
# qemu.id records its start time, the boot and its command line, taken when it came up
# shellcheck source=scripts/procid.sh
. "$here/scripts/procid.sh"
running() { proc_ours "$state/qemu.id" 2>/dev/null; }

write_ssh_config() {  # $1: the private key
  cat > "$state/ssh-config" <<EOF
Host default
  HostName 127.0.0.1
  User vagrant
  Port $(cat "$state/ssh-port")
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile $1
  IdentitiesOnly yes
  LogLevel FATAL
  ConnectTimeout 10
EOF
}

wait_ssh() {  # until the VM answers on ssh, or BOOT_TIMEOUT
  local t0; t0=$(date +%s)
  until vm_ssh true </dev/null 2>/dev/null; do
    running || die "qemu stopped while booting (serial console: $state/serial.log)"
    [ $(( $(date +%s) - t0 )) -lt "$BOOT_TIMEOUT" ] || die "no ssh after ${BOOT_TIMEOUT} s (serial console: $state/serial.log)"
    sleep 5
  done
}

box_image() {
  local box="${TORTOISE_BOX:-}"
  [ -n "$box" ] || box="$(bash "$here/scripts/vm-box.sh" --path)"
  [ -f "$box" ] || die "TORTOISE_BOX: $box is not a file (build the box with scripts/vm-box.sh)"
  local img; img="$(dirname "$box")/box.img"
  [ -f "$img" ] || die "$img missing next to $box (scripts/vm-box.sh keeps it there)"
  echo "$img"
}

cmd_up() {
  running && die "a VM of this clone runs already (pid $(proc_pid "$state/qemu.id")); 'scripts/vm-qemu.sh destroy' first"
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run 'make vm-setup'"
  local img; img="$(box_image)"
  mkdir -p "$state"
  rm -f "$state"/{disk.qcow2,id_ed25519,id_ed25519.pub,serial.log,qemu.pid,qemu.id}
  qemu-img create -q -f qcow2 -b "$img" -F qcow2 "$state/disk.qcow2"
  # ports on the loopback: a free one for ssh; Jupyter's, or a free one if it is taken (as
  # Vagrant's auto_correct)
  free_port > "$state/ssh-port"
  if port_free "$JUPYTER_PORT"; then echo "$JUPYTER_PORT" > "$state/jupyter-port"; else free_port > "$state/jupyter-port"; fi
  local accel=(-accel kvm -cpu host)
  # software emulation: not qemu64, which lacks x86-64-v2 (numpy's wheels die of SIGILL; docs/vm.md)
  [ "$DRIVER" = qemu ] && accel=(-accel tcg -cpu Nehalem)
  say "booting $img (overlay $state/disk.qcow2; $DRIVER, $CPUS vCPUs, $MEMORY MiB; ssh on 127.0.0.1:$(cat "$state/ssh-port"))"
  qemu-system-x86_64 "${accel[@]}" -smp "$CPUS" -m "$MEMORY" -display none -daemonize \
    -pidfile "$state/qemu.pid" -serial "file:$state/serial.log" \
    -drive "file=$state/disk.qcow2,format=qcow2,if=virtio" \
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$(cat "$state/ssh-port")-:22,hostfwd=tcp:127.0.0.1:$(cat "$state/jupyter-port")-:8888" \
    -device virtio-net-pci,netdev=n0
  proc_record "$(cat "$state/qemu.pid")" > "$state/qemu.id"  # -daemonize: the pid file is there on return
  # first Vagrant's insecure key (the box's), then a key of this VM's own in its place, as `vagrant up` does
  local insecure; insecure="$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant 2>/dev/null | head -1 || true)"
  [ -n "$insecure" ] || die "no Vagrant insecure key (install vagrant: make vm-setup)"
  cp "$insecure" "$state/insecure_key"; chmod 600 "$state/insecure_key"
  write_ssh_config "$state/insecure_key"
  wait_ssh
  ssh-keygen -q -t ed25519 -N "" -C "tortoiselab-qemu" -f "$state/id_ed25519"
  vm_ssh 'cat > ~/.ssh/authorized_keys' < "$state/id_ed25519.pub"
  write_ssh_config "$state/id_ed25519"
  vm_ssh true </dev/null || die "the VM refused its new key"
  rm -f "$state/insecure_key"
  cmd_rsync
  say "up: scripts/vm-qemu.sh ssh, or ssh -F $state/ssh-config default; Jupyter's port 8888 at 127.0.0.1:$(cat "$state/jupyter-port")"
}

cmd_rsync() {
  # as `vagrant rsync`: /vagrant owned by vagrant, the project copied in, what the VM made left alone
  vm_ssh "sudo mkdir -p $PROJECT && sudo chown vagrant:vagrant $PROJECT" </dev/null
  local ex=(); for e in "${EXCLUDES[@]}"; do ex+=(--exclude "$e"); done
  rsync -a --delete "${ex[@]}" -e "ssh $(ssh_opts)" "$here/" "default:$PROJECT/"
}

cmd_provision() {
  local name="${1:-}" env="TORTOISE_VM_KERNEL=$KERNEL TORTOISE_PROJECT=$PROJECT"
  case "$name" in
    bootstrap) vm_ssh "sudo sh $PROJECT/vagrant/bootstrap.sh" </dev/null ;;
    setup) vm_ssh "sudo make -C $PROJECT setup" </dev/null ;;
    kernel) vm_ssh "sudo env $env bash $PROJECT/vagrant/provision-kernel.sh $KERNEL" </dev/null ;;
    reboot)
      local boot; boot="$(vm_ssh 'cat /proc/sys/kernel/random/boot_id' </dev/null)"
      vm_ssh 'sudo systemctl reboot' </dev/null || true
      local t0 now; t0=$(date +%s)
      until now="$(vm_ssh 'cat /proc/sys/kernel/random/boot_id' </dev/null 2>/dev/null)" && [ -n "$now" ] \
            && [ "$now" != "$boot" ]; do
        running || die "qemu stopped during the reboot (serial console: $state/serial.log)"
        [ $(( $(date +%s) - t0 )) -lt "$BOOT_TIMEOUT" ] || die "the VM did not come back within ${BOOT_TIMEOUT} s"
        sleep 5
      done
      say "rebooted into $(vm_ssh 'uname -r' </dev/null)" ;;
    verify) vm_ssh "sudo env $env bash $PROJECT/vagrant/verify.sh" </dev/null ;;
    *) die "provision: which step? one of: ${STEPS[*]}" ;;
  esac
}

cmd_destroy() {
  if running; then
    local pid; pid="$(proc_pid "$state/qemu.id")"
    kill "$pid"
    for _ in $(seq 30); do running || break; sleep 1; done
    running && kill -9 "$pid"
    say "stopped qemu (pid $pid)"
  elif [ -f "$state/qemu.pid" ]; then
    say "did not signal pid $(cat "$state/qemu.pid"): $(proc_ours "$state/qemu.id" 2>&1)"
  fi
  rm -rf "$state"
}

case "${1:-}" in
  up) cmd_up ;;
  provision) shift; cmd_provision "$@" ;;
  ssh) shift; if [ "${1:-}" = -c ]; then shift; vm_ssh "$@"; else vm_ssh "$@"; fi ;;
  rsync) cmd_rsync ;;
  ssh-config) cat "$state/ssh-config" ;;
  port)
    case "${2:-}" in 22) f=ssh-port ;; 8888) f=jupyter-port ;; *) die "port: 22 or 8888 (the ports forwarded)" ;; esac
    [ -f "$state/$f" ] || die "no VM of this clone is up ('scripts/vm-qemu.sh up' first)"
    cat "$state/$f" ;;
  destroy) cmd_destroy ;;
  *) die "usage: scripts/vm-qemu.sh up | provision STEP | ssh [-c CMD] | rsync | ssh-config | port GUEST | destroy" ;;
esac
