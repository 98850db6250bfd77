#!/usr/bin/env bash
# Tortoise Lab VM, last provisioning step (root, after the reboot): the VM
# runs the kernel provisioning chose, every congestion control algorithm and
# netem are there, and the lab's `auto` backend picks native.
set -euo pipefail

project="${TORTOISE_PROJECT:-/vagrant}"
fail() { echo "verify: FAILED: $*" >&2; exit 1; }

want="$(cat /etc/tortoiselab-kernel 2>/dev/null || true)"
[ -n "$want" ] || fail "/etc/tortoiselab-kernel missing: the kernel step did not run"
have="$(uname -r)"
[ "$have" = "$want" ] || fail "running $have, expected $want (check GRUB's default, then 'vagrant reload')"
echo "verify: kernel $have"

cfg="/boot/config-$have"
grep -Eq '^CONFIG_NET_SCH_NETEM=(y|m)$' "$cfg" || fail "$cfg has no netem"
[ -d "/lib/modules/$have" ] || fail "no /lib/modules/$have"

algos=(reno cubic bic westwood htcp highspeed hybla vegas nv scalable lp veno yeah illinois dctcp cdg bbr
       cubic_plus reno_beta)
avail=" $(cat /proc/sys/net/ipv4/tcp_available_congestion_control) "
missing=()
for a in "${algos[@]}"; do [[ "$avail" == *" $a "* ]] || missing+=("$a"); done
[ "${#missing[@]}" -eq 0 ] || fail "not available after boot: ${missing[*]} (systemctl status systemd-modules-load)"
echo "verify: ${#algos[@]} algorithms available:$avail"
[ -d /sys/module/sch_netem ] || grep -q '^CONFIG_NET_SCH_NETEM=y' "$cfg" || fail "sch_netem not loaded"
for m in tcp_cubic_plus tcp_reno_beta; do
  echo "verify: $m from $(modinfo -n "$m")"
done

# the lab's own decision (src/tortoiselab/host/backends.py), when the project is here
py="$project/.venv/bin/python"
if [ -x "$py" ]; then
  (cd "$project" && "$py" - "${algos[@]}" <<'EOF'
import sys
from tortoiselab.host import backends
algos = sys.argv[1:]
ok, why = backends.host_can_emulate(algos)
info = backends.choose("auto", "auto", algos)
print(f"verify: host_can_emulate: {ok} ({why}); auto -> {info.backend}, clock {info.clock}")
sys.exit(0 if ok and info.backend == "native" else 1)
EOF
  ) || fail "the lab's auto backend does not pick native here"
  # the analysis stack's wheels need x86-64-v2 (SSE4.2, POPCNT): on a CPU
  # model without it (QEMU's qemu64) their import dies of SIGILL
  "$py" -c "import numpy, scipy.stats, pandas, pyarrow" \
    || fail "numpy/scipy/pandas/pyarrow do not load on this CPU ($(grep -m1 'model name' /proc/cpuinfo)); the VM needs an x86-64-v2 CPU model (Vagrantfile)"
  echo "verify: numpy, scipy, pandas and pyarrow load"
else
  echo "verify: $project/.venv not here (a synced folder that is not remounted after the reboot?):"
  echo "verify: run 'vagrant reload' and then 'sudo make -C $project experiment' inside"
fi
echo "verify: ok"
