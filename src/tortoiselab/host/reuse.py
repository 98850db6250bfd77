"""`tortoise run FILE --grid G --reuse-from F`: the runs grid G shares with
grid F of the same file, taken from F's folder instead of run again.

A run's id is the hash of its configuration, repetition and the file's seed
(spec/experiment.py), so a run of results/<name>@F with an id that grid G
also plans is the run G would do: the same path, the same seeds, on the
virtual clock the same packets. A powered grid that repeats a reduced one
with more repetitions (docs/architecture.md) thus only runs its new
repetitions. Only completed ok runs made on this invocation's backend and
clock are taken; the others are run again: a failed run, and a run made
elsewhere (a uml run on the virtual clock is not the run a native one on
the real clock would make: its times differ, docs/architecture.md), so that
a folder never mixes them.
Each is hard-linked (its captures are not copied), its run.json rewritten
with G's experiment name and `meta.reused_from` = F's folder name; runs G
already holds are left as they are.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tortoiselab.host import manifests, store, verify
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import experiment_lock, setup_lock
from tortoiselab.host.store import files
from tortoiselab.spec.experiment import ExperimentError, expand, load


class ReuseError(RunnerError):
    pass


def sources(exp_file: Path, grid: str | None, from_grid: str, results: Path) -> tuple[Path, Path, list[str]]:
    """(F's folder, G's folder, G's run ids), checked before anything is
    made: both grids defined by the file, not the same, F's folder there."""
    exp = load(exp_file, grid=grid)
    if from_grid == (grid or ""):
        raise ReuseError(f"--reuse-from {from_grid}: the grid being run; name another grid of {exp_file}")
    try:
        src = load(exp_file, grid=from_grid)
    except ExperimentError as e:  # its message names the grids the file has
        raise ReuseError(f"--reuse-from {from_grid}: {e}") from None
    src_dir = Path(results).resolve() / src.name
    if not src_dir.is_dir():
        raise ReuseError(f"--reuse-from {from_grid}: {src_dir} does not exist (run that grid first, or leave "
                         "--reuse-from out)")
    return src_dir, Path(results).resolve() / exp.name, [r.run_id for r in expand(exp)]


class Taken(list):
    """The run ids taken; .damaged: a line for each source run not taken
    because `tortoise verify` would name it (it is run again)."""

    def __init__(self) -> None:
        super().__init__()
        self.damaged: list[str] = []


def _not_taken(run_dir: Path, problems: list[verify.Problem]) -> str:
    line = (f"not reused: run {run_dir.name} of {run_dir.parent} is damaged ("
            + "; ".join(f"{p.file.name}: {p.what}" for p in problems[:3]) + "); it is run again here, and "
            f"`tortoise verify {run_dir.parent}` names it with the fix")
    print(f"tortoise: warning: {line}", file=sys.stderr, flush=True)
    return line


def take(src_dir: Path, exp_dir: Path, name: str, ids: list[str], backend: str | None = None,
         clock: str | None = None) -> list[str]:
    """Take the runs of `ids` that src_dir holds, completed and ok, into
    exp_dir (named `name`); return their ids. A source run that fails
    host/verify.check_run (manifest, record) is not taken: it is named
    (Taken.damaged, and on stderr) and run again. With backend or clock, only
    runs made on that backend and clock (None: any). The caller holds
    exp_dir's experiment lock (the runner does)."""
    taken = Taken()
    files.ensure_folder(exp_dir)
    for rid in ids:
        if store.completed(exp_dir, rid) or not store.completed(src_dir, rid):
            continue
        problems, _ = verify.check_run(src_dir / rid)  # its manifest and record: a damaged run is no source
        if problems:
            taken.damaged.append(_not_taken(src_dir / rid, problems))
            continue
        rec = store.read_record(src_dir / rid)
        if not rec.ok or rec.run_id != rid:
            continue
        if backend not in (None, rec.meta.backend) or clock not in (None, rec.meta.clock):
            continue
        tmp = exp_dir / f".reuse-{rid}"
        doing = f"taking run {rid} into {exp_dir}"
        files.remove(exp_dir, tmp, doing)  # ours, left by an interrupted take; never a link's target
        try:
            files.link_tree(exp_dir, src_dir / rid, tmp)
            meta = rec.meta.model_copy(update={"reused_from": src_dir.name})
            # run.json replaced (renamed over the link to F's record: F's left alone)
            store.write_record(tmp, rec.model_copy(update={"experiment": name, "meta": meta}))
            files.remove(exp_dir, tmp / manifests.MANIFEST, doing)  # F's manifest, linked: this record is another
            manifests.write_manifest(tmp)
            files.replace(exp_dir, tmp, exp_dir / rid, doing)  # never onto a link
        finally:
            files.remove(exp_dir, tmp, doing, quiet=True)
        taken.append(rid)
    if taken:
        with setup_lock(exp_dir):
            store.rebuild_table(exp_dir)
    return taken


def take_locked(exp_file: Path, grid: str | None, from_grid: str, results: Path, backend: str | None = None,
                clock: str | None = None) -> list[str]:
    """`take` under the experiment's lock, for an executor that does not run
    here (slurm: its array tasks then find these runs done); backend and
    clock as the tasks will have them (None, or "auto": any)."""
    src_dir, exp_dir, ids = sources(exp_file, grid, from_grid, results)
    with experiment_lock(exp_dir):
        return take(src_dir, exp_dir, load(exp_file, grid=grid).name, ids,
                    backend=None if backend == "auto" else backend, clock=None if clock == "auto" else clock)
