"""Batches as the unit of reproduction (docs/determinism.md, "Batches"):
which runs share a lab boot, in which order, fixed by the experiment file
alone, and what one invocation of the runner does with them.

A batch's membership and order come from the experiment's run order (its
seed, spec/experiment.run_order) and the batch size: the runs of one boot
key (host/pageload.boot_key), in run order, cut into near-equal chunks of
at most `size` (and at least two batches over the sweep). They
do not depend on --jobs, on which runs are pending, on --shard or
--runs-file, or on the machine. A run stored from the k-th place of its
batch saw the batch's first k-1 loads before it, always: an invocation that
does a batch's later runs only (a resume, a shard, a run list) loads the
earlier ones again first as replays whose results are discarded
(`plan_work`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from tortoiselab.host import store
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.pageload import boot_key
from tortoiselab.host.shards import parse_shard, read_run_list
from tortoiselab.spec import cols
from tortoiselab.spec.experiment import RunSpec, expand, load, run_order


# runs per lab boot at most (--batch), on both clocks: a boot and its
# topology cost about 2.1 s of wall time and a later load about 0.74 s (the
# tortoise powered grid, issue 38: docs/speed.md), so a run costs about
# 0.74 + 2.1/N s: 1.0 s at 8, 0.87 s at 16, 0.81 s at 32; 16 takes most of
# the boot out and still leaves a grid many batches to spread over --jobs.
# On the virtual clock a batch is the unit of reproduction: its membership is
# fixed by the experiment file (fixed_batches), and a later run of a batch
# repeats exactly in its batch, not alone (docs/determinism.md, "Batches")
DEFAULT_BATCH = 16
# a sweep of at least this many runs makes at least this many batches, so
# that even quick.yaml's six runs keep two cores busy (docs/speed.md)
MIN_BATCHES = 2


def default_batch(clock: str) -> int:
    """Runs per lab boot when --batch is not given: DEFAULT_BATCH on either
    clock (--batch 1: every run alone, a run's packets independent of the
    runs beside it)."""
    return DEFAULT_BATCH


def default_jobs(backend: str, clock: str, cpus: int) -> int:
    """Labs side by side when --jobs is not given: on the virtual clock of
    the uml backend one per CPU this process may use (a run's numbers do
    not depend on the machine's load there, docs/determinism.md; each lab
    takes a CPU of its own, host/cpus.py); otherwise 1 (on the real clock
    labs side by side share the machine's time, and the native backend
    shares the host's kernel)."""
    return max(1, cpus) if (backend, clock) == ("uml", "virtual") else 1


def jobs_for(jobs: int | None, backend: str, clock: str) -> int:
    """The labs side by side for --jobs (None: default_jobs, one per CPU
    this process may use); ValueError naming the fix for a number below 1,
    or above 1 on the native backend."""
    if jobs is None:
        return default_jobs(backend, clock, len(os.sched_getaffinity(0)))
    if jobs < 1:
        raise ValueError(f"jobs: give a whole number >= 1 (got {jobs}); leave --jobs out for one lab per CPU "
                         "on the virtual clock")
    if backend == "native" and jobs > 1:
        raise ValueError("jobs: runs on the native backend share the host's kernel; use --jobs 1 (or uml)")
    return jobs


@dataclass(frozen=True)
class Batch:
    """Runs that always share a lab boot, in their order in it."""

    id: str  # batch_id of the members
    runs: tuple[RunSpec, ...]

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]


@dataclass(frozen=True)
class BatchWork:
    """One lab boot of an invocation: the batch's loads from its first run
    up to the last run to store, and which of them to store (the others
    are replays: loaded, not stored)."""

    batch: Batch
    loads: tuple[RunSpec, ...]
    store: frozenset[str]

    @property
    def replays(self) -> list[str]:
        """The run ids loaded only so that the stored ones see their predecessors."""
        return [r.run_id for r in self.loads if r.run_id not in self.store]


def batch_id(run_ids: Sequence[str]) -> str:
    """A batch's name: the first 16 hex digits of the sha256 of its members'
    run ids in their order (so the same members in the same order, and
    nothing else, give the same name)."""
    return hashlib.sha256("\n".join(run_ids).encode()).hexdigest()[:16]


def fixed_batches(order: Sequence[RunSpec], size: int) -> list[Batch]:
    """The whole sweep (in run order: spec/experiment.run_order) as batches:
    the runs of each boot key in run order, cut into batch_counts' number
    of consecutive chunks whose sizes differ by at most one (the larger
    first); the batches listed in the order of their first run. ValueError
    for a size below 1."""
    if size < 1:
        raise ValueError(f"batch: must be at least 1 (got {size}); 1 boots the lab once per run")
    by_key: dict[str, list[RunSpec]] = {}
    for r in order:
        by_key.setdefault(boot_key(r), []).append(r)
    counts = batch_counts([len(v) for v in by_key.values()], size)
    chunks = [c for runs, k in zip(by_key.values(), counts) for c in _even_chunks(runs, k)]
    first = {r.run_id: i for i, r in enumerate(order)}
    chunks.sort(key=lambda c: first[c[0].run_id])
    return [Batch(batch_id([r.run_id for r in c]), tuple(c)) for c in chunks]


def batch_counts(key_sizes: Sequence[int], size: int) -> list[int]:
    """How many batches each boot key's runs make: enough that none holds
    more than `size` runs, and over the whole sweep at least MIN_BATCHES
    (as far as there are runs), so that a small experiment still spreads
    over two cores; an added batch goes to the key whose batches are
    largest (the first such key on a tie)."""
    counts = [-(-n // size) for n in key_sizes]
    while sum(counts) < min(MIN_BATCHES, sum(key_sizes)):
        i = max(range(len(counts)), key=lambda j: (key_sizes[j] / counts[j], -j))
        counts[i] += 1
    return counts


def _even_chunks(runs: Sequence[RunSpec], k: int) -> list[list[RunSpec]]:
    """runs cut into k consecutive chunks whose sizes differ by at most one,
    the larger first."""
    q, extra = divmod(len(runs), k)
    out, at = [], 0
    for i in range(k):
        n = q + (1 if i < extra else 0)
        out.append(list(runs[at:at + n]))
        at += n
    return out


def plan_work(batches: Sequence[Batch], to_store: Iterable[str]) -> list[BatchWork]:
    """The lab boots that store the runs of `to_store` (pending runs of this
    invocation), in batch order: for each batch holding one of them, its
    loads from its first run to the last run to store; the runs before that
    are replays when not to be stored (stored already, or another
    invocation's)."""
    want = set(to_store)
    out = []
    for b in batches:
        places = [i for i, r in enumerate(b.runs) if r.run_id in want]
        if places:
            out.append(BatchWork(b, b.runs[:places[-1] + 1], frozenset(b.runs[i].run_id for i in places)))
    return out


def in_batch_order(batches: Sequence[Batch], run_ids: Iterable[str]) -> list[str]:
    """run_ids ordered by batch, then by place in the batch (the order in
    which the runner stores them, so --limit N keeps a batch's first runs)."""
    keep = set(run_ids)
    return [r for b in batches for r in b.run_ids if r in keep]


def shard_of_batches(batches: Sequence[Batch], run_ids: Iterable[str], shard: tuple[int, int]) -> list[str]:
    """Slice i of N of the runs run_ids, whole batches at a time: the
    batches holding one of run_ids, in batch order, at positions i-1,
    i-1+N, ...; the runs of run_ids in them. A run's slice depends on the
    sweep, the batch size and run_ids alone (not on what is pending), so
    shards started at other moments split the runs disjointly, their
    union is run_ids, and no two shards load the same batch."""
    keep = set(run_ids)
    held = [b for b in batches if keep.intersection(b.run_ids)]
    i, n = shard
    return [r for b in held[i - 1::n] for r in b.run_ids if r in keep]


def boot_prefix(batch_runs: Sequence[RunSpec], run_id: str) -> list[RunSpec]:
    """A run's batch up to and including the run: what a rerun of it loads
    (--verify-determinism). ValueError when the run is not in the batch."""
    ids = [r.run_id for r in batch_runs]
    if run_id not in ids:
        raise ValueError(f"run {run_id} is not in its recorded batch")
    return list(batch_runs[:ids.index(run_id) + 1])


def replay_reproduced(stored_run: Path, ld: dict) -> bool | None:
    """Whether a replayed load gave its stored run's PLT and bytes (a cheap
    check: the full comparison is --verify-determinism); None when either
    is missing (a failed load, a record without them, another folder's run)."""
    try:
        rec = store.read_record(stored_run)
    except (OSError, store.StoreError):
        return None
    keys = (cols.PLT, "bytes")
    got, had = (ld.get("summary") or {}), rec.summary
    if ld.get("error") or had is None or any(got.get(k) is None or getattr(had, k) is None for k in keys):
        return None
    return all(got[k] == getattr(had, k) for k in keys)


def selected(exp_file: Path, grid: str | None, runs_file: Path | None, shard: tuple[int, int] | None,
              size: int):
    """(experiment, its whole sweep, the run ids of this invocation's slice,
    every run in run order, the slice's runs in run order, the sweep's
    batches of `size`: host/fixed_batches). A shard is whole batches."""
    if shard is not None:
        parse_shard(f"{shard[0]}/{shard[1]}")
    exp = load(exp_file, grid=grid)  # a grid runs into results/<name>@<grid>
    sweep = expand(exp)
    ids = [r.run_id for r in sweep]
    if runs_file is not None:
        ids = read_run_list(runs_file, ids)
    runs = run_order(exp, sweep)
    try:
        fixed = fixed_batches(runs, size)
    except ValueError as exc:
        raise RunnerError(str(exc)) from None
    if shard is not None:
        ids = shard_of_batches(fixed, ids, shard)
    keep = set(ids)
    return exp, sweep, ids, runs, [r for r in runs if r.run_id in keep], fixed
