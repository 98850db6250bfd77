"""Slices of a sweep for runners side by side (--shard i/N) and run lists
frozen at submission (--runs-file)."""

from __future__ import annotations

import re
from pathlib import Path

from tortoiselab.host.errors import RunnerError



def parse_shard(spec: str) -> tuple[int, int]:
    """'i/N' -> (i, N), 1 <= i <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec or "")
    if not m:
        raise RunnerError(f"shard: give i/N, the i-th of N slices of the sweep (e.g. --shard 2/3), not {spec!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise RunnerError(f"shard: N (the number of slices) must be at least 1, got {spec!r}; e.g. --shard 1/4")
    if not 1 <= i <= n:
        raise RunnerError(f"shard: i must be between 1 and N={n}, got {i} in {spec!r}; e.g. --shard 1/{n}")
    return i, n


def shard_slice(run_ids: list[str], shard: tuple[int, int]) -> list[str]:
    """Slice i of N holds the runs at positions i-1, i-1+N, ... of run_ids
    (the sweep in its expansion order, or a run list the Slurm executor
    froze at submission). The slices differ in size by one at most, and a
    run's slice depends on the list alone, not on what is pending: N runners
    that each work out what is pending at a different moment still split
    the sweep disjointly, and their union is the whole list."""
    i, n = shard
    return run_ids[i - 1::n]


def read_run_list(path: Path, sweep_ids: list[str]) -> list[str]:
    """A run list (--runs-file): one run id per line, each of this sweep."""
    try:
        ids = [ln.strip() for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError as e:
        raise RunnerError(f"runs-file: cannot read {path}: {e.strerror}") from None
    known = set(sweep_ids)
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise RunnerError(f"runs-file: {len(unknown)} run id(s) of {path} are not in this sweep (first: "
                          f"{unknown[0]}); list ids from the same experiment file and grid")
    if len(set(ids)) != len(ids):
        raise RunnerError(f"runs-file: {path} lists a run id twice; give each run once")
    return ids


