#!/usr/bin/env bash
# make reproduce: every study experiment on the grids of GRID (a list such as
# "powered,reduced", its last first: a later grid takes the runs it shares
# with the one before by --reuse-from), the coalescing study's browser grid,
# each study's sensitivity maps (tortoise map), then REPRODUCTION.md. A run that failed honestly (tortoise run's exit 3) or
# a real-clock path judged off (exit 4) is counted by the claims that read
# it; bad input (2) or a stop (130, 143) ends the reproduction. The exit
# status is the report's: 0 when every claim has its data, 5 when one lacks
# it (docs/statistics.md).
set -u
grid=$1 jobs=$2; shift 2
venv=${VENV:-.venv}
failed=()

run() {  # tortoise run ARGS...; continue on 0, 3, 4
    "$venv/bin/tortoise" run "$@" --jobs "$jobs"
    local rc=$?
    case $rc in
        0) ;;
        3|4) failed+=("$* (exit $rc)") ;;
        *) echo "reproduce: tortoise run $* stopped with exit $rc" >&2; exit "$rc" ;;
    esac
}

IFS=, read -ra grids <<<"$grid"
for e in "$@"; do
    prev=
    for ((i = ${#grids[@]} - 1; i >= 0; i--)); do
        g=${grids[i]}
        grep -q "^  $g:" "experiments/$e.yaml" || continue
        echo "== $e --grid $g${prev:+ --reuse-from $prev} =="
        run "experiments/$e.yaml" --grid "$g" ${prev:+--reuse-from "$prev"}
        prev=$g
    done
done
echo "== coalescing --grid browser =="
run experiments/coalescing.yaml --grid browser
# CUBIC+'s 7.2 and 7.3 as the paper ran them, without added loss (exact runs: one repetition; docs/statistics.md)
echo "== cubic_plus --grid paper =="
run experiments/cubic_plus.yaml --grid paper
# the population assumptions one at a time (docs/population.md, "Sensitivity"): minutes, the base setting's runs
# taken from the reduced grid; the tables in results/population-sensitivity.md
for e in tortoise-population coalescing-population; do
    reuse=(); [ -d "results/$e@reduced" ] && reuse=(--reuse-from reduced)
    echo "== $e --grid sensitivity ${reuse[*]} =="
    run "experiments/$e.yaml" --grid sensitivity "${reuse[@]}"
done
"$venv/bin/tortoise" population-sensitivity tortoise-population coalescing-population --write \
    || echo "reproduce: tortoise population-sensitivity failed" >&2
for e in "$@"; do  # each study's sensitivity maps (docs/maps.md): a few minutes each
    grep -q "^maps:" "experiments/$e.yaml" || continue
    echo "== tortoise map $e =="
    "$venv/bin/tortoise" map "experiments/$e.yaml" --jobs "$jobs" || failed+=("tortoise map $e (exit $?)")
done
for f in "${failed[@]}"; do
    echo "reproduce: some runs failed or a path was judged off in: $f; REPRODUCTION.md counts them per claim"
done
exec "$venv/bin/tortoise" report --reproduction --grid "$grid"
