#!/usr/bin/env bash
# `pip install ARGS...` with its progress in packages (Makefile's venv step):
# pip's own output goes to a log, the terminal gets a line per package
# resolved ("Collecting", or already there), then how many are installed;
# on failure the log's end.
#
#   scripts/pip-install.sh PYTHON ARGS...
set -euo pipefail
py="$1"; shift
log="$(mktemp "${TMPDIR:-/tmp}/tortoiselab-pip.XXXXXX.log")"
echo "pip: installing $* (log: $log)"
if ! (set -o pipefail
      "$py" -m pip install --progress-bar off "$@" 2>&1 | tee -a "$log" | awk '
        /^Collecting / { n++; print "pip: " n " packages resolved (" $2 ")"; fflush() }
        /^Requirement already satisfied: / { have++ }
        /^Installing collected packages: / {
          sub(/^Installing collected packages: /, ""); k = split($0, names, ", ")
          print "pip: installing " k " packages (" have + 0 " already there)"; fflush() }
        /^Successfully installed / { print "pip: done, " NF - 2 " packages installed"; fflush() }
      ' ); then
  echo "pip: install failed; the end of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
