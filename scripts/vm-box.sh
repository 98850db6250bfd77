#!/usr/bin/env bash
# Tortoise Lab: a Debian 12 Vagrant box built here from Debian's packages,
# for machines that cannot download the public box the Vagrantfile names
# (debian/bookworm64). Equivalent to it for the lab: Debian 12 with Debian's
# kernel and GRUB on a 20 GiB disk, systemd, openssh, DHCP on eth0, the
# `vagrant` user (password vagrant) with passwordless sudo and Vagrant's
# insecure public key (which `vagrant up` replaces by a key pair of its own).
#
#   scripts/vm-box.sh            build the box if its cache entry is missing;
#                                print the .box file's path (last line)
#   scripts/vm-box.sh --path     print where the box is (or would be), build nothing
#   scripts/vm-box.sh --hash     print the hash of the box's inputs
#
# The box is cached outside the clone, in
# ${TORTOISE_CACHE:-~/.cache/tortoiselab}/box/bookworm64-<hash>/, the hash
# covering this script (package list, suites, image layout) and the public
# key; a second call with the same inputs is a cache hit. The folder holds
# the libvirt box format (box.img qcow2, metadata.json, Vagrantfile) and the
# same three packed as tortoiselab-bookworm64.box for `vagrant box add`
# (the Vagrantfile does that itself when TORTOISE_BOX names the .box file;
# docs/vm.md). Needs root (a loop device and a chroot), mmdebstrap, grub-pc's
# files (installed into the image by apt), qemu-utils: `make vm-setup`.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
self="$here/scripts/vm-box.sh"
cache="${TORTOISE_CACHE:-$HOME/.cache/tortoiselab}/box"
SUITE=bookworm
MIRROR="${TORTOISE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${TORTOISE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
DISK_GIB=20
# what the public box has that the lab's provisioning relies on: init, the
# kernel and its bootloader, ssh and sudo for vagrant, DHCP, rsync for the
# synced folder
PACKAGES=(systemd-sysv udev dbus linux-image-amd64 grub-pc initramfs-tools
          openssh-server sudo ifupdown isc-dhcp-client iproute2 netbase
          rsync ca-certificates less procps kmod)

pubkey() {
  # Vagrant's insecure public key, from Debian's vagrant package (any other
  # with TORTOISE_BOX_PUBKEY)
  local k="${TORTOISE_BOX_PUBKEY:-}"
  if [ -z "$k" ]; then
    k="$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | head -1 || true)"
  fi
  [ -n "$k" ] && [ -f "$k" ] || { echo "vm-box: no Vagrant public key (install vagrant, or set TORTOISE_BOX_PUBKEY)" >&2; exit 1; }
  echo "$k"
}

# Certificate authorities this machine's administrator added (Debian's
# place for them): a network that inspects TLS (a company's proxy) needs the
# VM to trust them as the host does, or apt over https and pip fail in it
local_cas() { ls /usr/local/share/ca-certificates/*.crt 2>/dev/null | sort || true; }

inputs_hash() {
  # the inputs, not the output: this script, the key, the local CAs
  { cat "$self"; cat "$(pubkey)"; local_cas | while read -r c; do cat "$c"; done; } | sha256sum | cut -c1-16
}

box_dir() { echo "$cache/bookworm64-$(inputs_hash)"; }

case "${1:-}" in
  --hash) inputs_hash; exit 0 ;;
  --path) echo "$(box_dir)/tortoiselab-bookworm64.box"; exit 0 ;;
  "") ;;
  *) echo "vm-box: unknown argument '$1' (none, --path or --hash)" >&2; exit 2 ;;
esac

dir="$(box_dir)"
if [ -f "$dir/BUILD_OK" ]; then
  echo "vm-box: cached: $dir"
  echo "$dir/tortoiselab-bookworm64.box"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "vm-box: building the box needs root (a loop device, a chroot)" >&2; exit 1; }
for t in mmdebstrap qemu-img sfdisk mkfs.ext4 losetup; do
  command -v "$t" >/dev/null || { echo "vm-box: $t missing: run 'make vm-setup'" >&2; exit 1; }
done
key="$(pubkey)"

work="$(mktemp -d "${TMPDIR:-/tmp}/tortoise-box.XXXXXX")"
mnt="$work/root"
loop=""
cleanup() {
  mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
t0=$(date +%s)
log() { echo "vm-box: [$(( $(date +%s) - t0 )) s] $*"; }

# 1. Debian's packages, unpacked and configured by mmdebstrap, cached by
#    the hash of its command line (a rebuild after a change further down
#    skips the download)
mm_args=(--variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")"
         --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*'
         "$SUITE" - "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main"
         "deb $SECURITY_MIRROR $SUITE-security main")
mkdir -p "$cache"
rootfs="$cache/.rootfs-$(printf '%s\n' "${mm_args[@]}" | sha256sum | cut -c1-16).tar"
if [ -f "$rootfs" ]; then
  log "Debian $SUITE root file system: cached ($rootfs)"
else
  log "bootstrapping Debian $SUITE (mmdebstrap, ${#PACKAGES[@]} packages and their dependencies)"
  mmdebstrap "${mm_args[@]}" >"$rootfs.part" 2>"$work/mmdebstrap.log" \
    || { tail -30 "$work/mmdebstrap.log" >&2; rm -f "$rootfs.part"; exit 1; }
  mv "$rootfs.part" "$rootfs"
fi

# 2. the disk: an MBR with one partition from sector 2048, reached through
#    a loop device at that offset (no partition scan: the build machine's
#    kernel may not read partition tables)
log "disk: ${DISK_GIB} GiB, one bootable ext4 partition"
truncate -s "${DISK_GIB}G" "$work/disk.raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw"
part_sectors="$(sfdisk -l -q -o Sectors "$work/disk.raw" | tail -1 | tr -d ' ')"
part_loop() { losetup -f --show --offset $((2048 * 512)) --sizelimit $((part_sectors * 512)) "$work/disk.raw"; }
loop="$(part_loop)"
mkfs.ext4 -q -L tortoise-root "$loop"
uuid="$(blkid -s UUID -o value "$loop")"
mkdir -p "$mnt"
mount "$loop" "$mnt"
tar -C "$mnt" --numeric-owner --xattrs --xattrs-include='*' -xpf "$rootfs"

log "configuring: fstab, network, vagrant user, ssh, GRUB's settings"
echo "UUID=$uuid / ext4 errors=remount-ro 0 1" > "$mnt/etc/fstab"
echo "tortoiselab-box" > "$mnt/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\ttortoiselab-box\n' > "$mnt/etc/hosts"
printf '%s\n' "source /etc/network/interfaces.d/*" "auto lo" "iface lo inet loopback" \
  "allow-hotplug eth0" "iface eth0 inet dhcp" > "$mnt/etc/network/interfaces"
# a machine id and ssh host keys of its own for every VM, made at its first boot
: > "$mnt/etc/machine-id"
mkdir -p "$mnt/etc/systemd/system/ssh.service.d"
printf '%s\n' "[Service]" "ExecStartPre=" "ExecStartPre=/usr/bin/ssh-keygen -A" \
  "ExecStartPre=/usr/sbin/sshd -t" > "$mnt/etc/systemd/system/ssh.service.d/host-keys.conf"
echo "UseDNS no" > "$mnt/etc/ssh/sshd_config.d/vagrant.conf"
chroot "$mnt" useradd -m -s /bin/bash -U vagrant
echo "vagrant:vagrant" | chroot "$mnt" chpasswd
echo "vagrant ALL=(ALL) NOPASSWD:ALL" > "$mnt/etc/sudoers.d/vagrant"
chmod 0440 "$mnt/etc/sudoers.d/vagrant"
[ "$(chroot "$mnt" id -u vagrant)" = 1000 ] || { echo "vm-box: vagrant is not uid 1000" >&2; exit 1; }
install -d -m 0700 -o 1000 -g 1000 "$mnt/home/vagrant/.ssh"
install -m 0600 -o 1000 -g 1000 "$key" "$mnt/home/vagrant/.ssh/authorized_keys"
cas="$(local_cas)"
if [ -n "$cas" ]; then
  log "carrying this machine's $(echo "$cas" | wc -l) local CA certificate(s) into the box"
  # shellcheck disable=SC2086
  cp $cas "$mnt/usr/local/share/ca-certificates/"
  chroot "$mnt" update-ca-certificates >/dev/null
  # pip from PyPI (the venv upgrades to it) reads certifi's bundle unless told
  printf '%s\n' "[global]" "cert = /etc/ssl/certs/ca-certificates.crt" > "$mnt/etc/pip.conf"
fi
mkdir -p "$mnt/etc/default/grub.d"
printf '%s\n' "GRUB_TIMEOUT=1" \
  'GRUB_CMDLINE_LINUX="net.ifnames=0 biosdevname=0 console=tty0 console=ttyS0,115200n8"' \
  'GRUB_TERMINAL="console serial"' 'GRUB_SERIAL_COMMAND="serial --speed=115200"' \
  > "$mnt/etc/default/grub.d/tortoiselab-box.cfg"
# GRUB goes in by the image's own grub-install, run as init of a first boot
# (3.): on its own disk it sees the partition as every VM will
install -m 0755 /dev/stdin "$mnt/tortoise-box-grub" <<'SCRIPT'
#!/bin/sh
# scripts/vm-box.sh: once, as init of the box's first boot; then powers off
mount -t proc proc /proc 2>/dev/null; mount -t sysfs sys /sys 2>/dev/null; mount -t devtmpfs dev /dev 2>/dev/null
mount -o remount,rw /
if grub-install --target=i386-pc /dev/vda && update-grub; then echo TORTOISE-BOX-GRUB-OK; else echo TORTOISE-BOX-GRUB-FAILED; fi
rm -f /tortoise-box-grub
sync; mount -o remount,ro /; sync
echo o > /proc/sysrq-trigger
sleep 60
SCRIPT
kernel_release="$(ls "$mnt/lib/modules" | sort -V | tail -1)"
cp "$mnt/boot/vmlinuz-$kernel_release" "$work/vmlinuz"
cp "$mnt/boot/initrd.img-$kernel_release" "$work/initrd.img"
chroot "$mnt" apt-get clean
rm -rf "$mnt"/var/lib/apt/lists/*
umount "$mnt"
losetup -d "$loop"; loop=""

# 3. GRUB, from a boot of the box's own kernel under qemu (software
#    emulation works everywhere; about a minute)
log "installing GRUB from a first boot of the image (qemu)"
timeout 900 qemu-system-x86_64 -accel tcg -m 1024 -smp 1 -display none -no-reboot \
  -serial "file:$work/grub-boot.log" -drive "file=$work/disk.raw,format=raw,if=virtio" \
  -kernel "$work/vmlinuz" -initrd "$work/initrd.img" \
  -append "root=UUID=$uuid ro console=ttyS0 init=/tortoise-box-grub panic=-1" >/dev/null 2>&1 || true
grep -q TORTOISE-BOX-GRUB-OK "$work/grub-boot.log" \
  || { tail -30 "$work/grub-boot.log" >&2; echo "vm-box: GRUB was not installed (log above)" >&2; exit 1; }
loop="$(part_loop)"
mount -o ro "$loop" "$mnt"
grep -q "root=UUID=$uuid" "$mnt/boot/grub/grub.cfg" || { echo "vm-box: grub.cfg does not boot UUID=$uuid" >&2; exit 1; }
[ ! -e "$mnt/tortoise-box-grub" ] || { echo "vm-box: the first boot left its script behind" >&2; exit 1; }
umount "$mnt"
losetup -d "$loop"; loop=""

log "packing the libvirt box (qcow2)"
part="$(mktemp -d "$cache/.building.XXXXXX")"
qemu-img convert -O qcow2 "$work/disk.raw" "$part/box.img"
mv "$work/vmlinuz" "$part/vmlinuz"
cat > "$part/metadata.json" <<EOF
{"provider": "libvirt", "format": "qcow2", "virtual_size": $DISK_GIB}
EOF
cat > "$part/Vagrantfile" <<'EOF'
# Tortoise Lab's locally built Debian 12 box (scripts/vm-box.sh)
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
  end
end
EOF
cat > "$part/box-info.json" <<EOF
{"suite": "$SUITE", "kernel": "$kernel_release", "inputs": "$(inputs_hash)",
 "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "packages": "$(IFS=' '; echo "${PACKAGES[*]}")"}
EOF
tar -C "$part" -cf "$part/tortoiselab-bookworm64.box" metadata.json Vagrantfile box.img
touch "$part/BUILD_OK"
rm -rf "$dir"
mv "$part" "$dir"
log "built $dir ($(du -sh "$dir/box.img" | cut -f1) qcow2, kernel $kernel_release)"
echo "$dir/tortoiselab-bookworm64.box"
