# A recorded pid is signalled only while it is the process recorded: the
# shell side of src/tortoiselab/host/procid.py (docs/faults.md). Sourced by
# scripts/vm-qemu.sh and scripts/vm-test.sh.
#
#   proc_record PID > FILE   "PID START BOOT_ID CMD": its start time in clock
#                            ticks since boot (field 22 of /proc/PID/stat), this
#                            machine's boot id and the sha256 of its command line
#                            (/proc/PID/cmdline, 16 hex digits), taken at launch
#   proc_ours FILE           exit 0 when FILE's pid runs now with the start
#                            time and command line recorded, on the boot
#                            recorded; else 1 and why on stderr (a state folder
#                            copied from elsewhere, or kept across a reboot,
#                            names no process of ours). A record of before the
#                            command line (3 fields) is checked on the other two
#   proc_pid FILE            the pid FILE records

proc_boot_id() { cat /proc/sys/kernel/random/boot_id; }
proc_start() {  # the fields after the command name's last ')' start at field 3
  local s
  s="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  s="${s##*) }"
  # shellcheck disable=SC2086
  set -- $s
  echo "${20}"
}
proc_cmd() {  # the sha256 of the process's command line (NULs and all), 16 hex digits
  local h
  [ -r "/proc/$1/cmdline" ] || return 1
  h="$(sha256sum < "/proc/$1/cmdline")" || return 1
  echo "${h:0:16}"
}
proc_record() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || { echo "proc_record: not a pid: '${1:-}'" >&2; return 1; }
  local st cmd
  st="$(proc_start "$1")" && cmd="$(proc_cmd "$1")" || { echo "proc_record: no process $1" >&2; return 1; }
  echo "$1 $st $(proc_boot_id) $cmd"
}
proc_pid() { local pid _r; read -r pid _r < "$1" && echo "$pid"; }
proc_ours() {
  local pid st boot cmd now
  [ -f "$1" ] && [ ! -L "$1" ] || { echo "no record $1 (or a link): nothing is signalled" >&2; return 1; }
  read -r pid st boot cmd < "$1" || { echo "$1: unreadable" >&2; return 1; }
  [[ "$pid" =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] || { echo "$1: not a pid record" >&2; return 1; }
  [ "$boot" = "$(proc_boot_id)" ] || { echo "$1: pid $pid was recorded on another machine or boot" >&2; return 1; }
  now="$(proc_start "$pid")" || { echo "$1: pid $pid no longer runs" >&2; return 1; }
  [ "$now" = "$st" ] || { echo "$1: pid $pid is another process now (started at tick $now, recorded $st)" >&2; return 1; }
  [ -z "$cmd" ] || [ "$(proc_cmd "$pid")" = "$cmd" ] || {
    echo "$1: pid $pid runs another command line than the one recorded (sha256 $(proc_cmd "$pid"), recorded $cmd)" >&2
    return 1
  }
}
