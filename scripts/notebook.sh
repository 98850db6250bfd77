#!/bin/bash
# `make notebook`: JupyterLab on notebooks/ with the project's venv as its
# kernel (the venv's own python3 kernel: ipykernel is installed in it).
# NOTEBOOK_IP (default 127.0.0.1; 0.0.0.0 in the VM, whose port 8888 the
# Vagrantfile forwards) and NOTEBOOK_PORT (default 8888). Jupyter prints the
# address with its token; open it in a browser. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(lab --no-browser --ip="${NOTEBOOK_IP:-127.0.0.1}" --port="${NOTEBOOK_PORT:-8888}"
      --ServerApp.root_dir="$PWD/notebooks")
# root runs it in the course VM (vagrant) and on lab machines; Jupyter refuses root unless told
[ "$(id -u)" = 0 ] && args+=(--allow-root)
exec .venv/bin/jupyter "${args[@]}" "$@"
