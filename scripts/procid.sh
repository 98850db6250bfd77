# A recorded pid is signalled only while it is the process recorded: the
# shell side of src/tortoiselab/host/procid.py (docs/faults.md). Sourced by
# scripts/vm-qemu.sh and scripts/vm-test.sh.
#
#   proc_record PID > FILE   "PID START BOOT_ID": its start time in clock ticks
#                            since boot (field 22 of /proc/PID/stat) and this
#                            machine's boot id, taken at launch
#   proc_ours FILE           exit 0 when FILE's pid runs now with the start
#                            time recorded, on the boot recorded; else 1 and why
#                            on stderr (a state folder copied from elsewhere, or
#                            kept across a reboot, names no process of ours)
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
proc_record() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] || { echo "proc_record: not a pid: '${1:-}'" >&2; return 1; }
  local st; st="$(proc_start "$1")" || { echo "proc_record: no process $1" >&2; return 1; }
  echo "$1 $st $(proc_boot_id)"
}
proc_pid() { local pid _r; read -r pid _r < "$1" && echo "$pid"; }
proc_ours() {
  local pid st boot now
  [ -f "$1" ] && [ ! -L "$1" ] || { echo "no record $1 (or a link): nothing is signalled" >&2; return 1; }
  read -r pid st boot < "$1" || { echo "$1: unreadable" >&2; return 1; }
  [[ "$pid" =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] || { echo "$1: not a pid record" >&2; return 1; }
  [ "$boot" = "$(proc_boot_id)" ] || { echo "$1: pid $pid was recorded on another machine or boot" >&2; return 1; }
  now="$(proc_start "$pid")" || { echo "$1: pid $pid no longer runs" >&2; return 1; }
  [ "$now" = "$st" ] || { echo "$1: pid $pid is another process now (started at tick $now, recorded $st)" >&2; return 1; }
}
