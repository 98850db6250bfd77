"""One experiment per results folder (docs/inputs.md, "One experiment per
folder"): a folder holds the runs of one version of one experiment, and a
file that expands to other runs is refused before anything is made, so that
no summary, report or grade pools two versions (seen: the same `name` with
RTT 50, then 300, into one folder: "4 of 2 runs complete", each arm's p50
pooled from both RTTs).

The version is the hash of the expanded runs: the sorted run ids of the
whole sweep (each id hashes its run's configuration, repetition and seed,
spec/experiment.py) and the folder's experiment name (<name> or
<name>@<grid>). It is written once, at the folder's first run, as
<folder>/experiment.json beside experiment.yaml; every later `tortoise run`
compares. Shards (--shard i/N), --runs-file and --limit run slices of the
same sweep: the same hash. A folder made before the hash existed is taken
if its experiment.yaml expands to the same runs (the hash is then written),
refused if not; a folder without either is refused if it holds a run the
sweep does not have.

Readers ask the same question of every run folder (`folder_runs`, used by
host/verify.py): a run whose id is not a run of the folder's experiment
was copied in from elsewhere and is named and left out, never pooled.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tortoiselab.host import safefs
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store import files
from tortoiselab.host.storedtraces import FolderTraces, folder_traces
from pydantic import ValidationError

from tortoiselab.spec.experiment import Experiment, ExperimentError, RunSpec, apply_grid, expand, load
from tortoiselab.spec.sweep import canonical
from tortoiselab.spec.yamlfile import YamlFileError, read_yaml

RECORD = "experiment.json"
RUN_DIR = re.compile(r"^[0-9a-f]{12}$")


class OtherVersion(RunnerError):
    """The results folder holds another version of the experiment."""


def version(name: str, run_ids: list[str]) -> dict:
    """What experiment.json records: the name, the number of runs and the
    sha256 of the name and the sorted run ids."""
    ids = sorted(run_ids)
    digest = hashlib.sha256(canonical({"experiment": name, "runs": ids}).encode()).hexdigest()
    return {"experiment": name, "runs": len(ids), "sha256": digest}


def _read_no_follow(path: Path) -> bytes | None:
    """The file's bytes, None if there is none; a link is not followed."""
    try:  # nor from a FIFO, which would hang the runner (host/safefs.py)
        return safefs.read_bytes_regular(path, doing="results", limit=1 << 20)
    except FileNotFoundError:
        return None
    except safefs.LinkRefused:
        raise OtherVersion(f"results: {path} is a link; the folder's files are its own: move the link away "
                           "or give --results another folder") from None


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _differences(stored: Experiment, exp: Experiment) -> str:
    """The settings that differ, the stored version's first (at most 3)."""
    skip = {"description", "grids"}
    a = _flat({k: v for k, v in stored.model_dump().items() if k not in skip})
    b = _flat({k: v for k, v in exp.model_dump().items() if k not in skip})
    diffs = [f"{k}: {a.get(k)!r} in its experiment.yaml, {b.get(k)!r} in this file"
             for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return "; ".join(diffs[:3]) + (f"; {len(diffs) - 3} more" if len(diffs) > 3 else "")


def _stored_experiment(exp_dir: Path, grid: str | None) -> tuple[Experiment | None, str]:
    """The folder's experiment.yaml as its grid runs it, or None and why."""
    f = exp_dir / "experiment.yaml"
    if _read_no_follow(f) is None:
        return None, "it has no experiment.yaml"
    try:  # its traces from the project's or the folder's own copies (host/storedtraces.py)
        with folder_traces(exp_dir):
            return load(f, grid=grid), ""
    except ExperimentError as exc:
        return None, f"its experiment.yaml does not load ({str(exc).splitlines()[0][:200]})"


def _refuse(exp_dir: Path, exp: Experiment, why: str) -> OtherVersion:
    name = exp.name.partition("@")[0]
    return OtherVersion(f"results: {exp_dir} holds another version of experiment {name} ({why}); use a new `name` "
                        f"in the file or another --results folder (nothing is pooled across versions)")


def _why_other(exp_dir: Path, exp: Experiment, grid: str | None, stored_runs: int | None) -> str:
    stored, why_not = _stored_experiment(exp_dir, grid)
    if stored is not None and (diff := _differences(stored, exp)):
        return diff
    if stored is not None:
        return ("the same settings, expanded to other runs: a region profile, trace or host it names "
                "changed since")
    return (f"{stored_runs} runs recorded in {RECORD}, another set than this file's" if stored_runs is not None
            else why_not)


def _record(exp_dir: Path, mine: dict) -> dict | None:
    """Write experiment.json if there is none (never over one, never through
    a link); None if written, else the one found."""
    files.ensure_folder(exp_dir)
    # by a hard link of a temporary: fails if one is there (another shard's, a link), never replaced
    if files.write_once(exp_dir, exp_dir / RECORD, json.dumps(mine, indent=1, sort_keys=True) + "\n",
                        doing=f"results folder {exp_dir}"):
        return None
    return _parse(exp_dir, _read_no_follow(exp_dir / RECORD) or b"")


def _parse(exp_dir: Path, data: bytes) -> dict:
    try:
        rec = json.loads(data)
        if isinstance(rec, dict) and isinstance(rec.get("sha256"), str):
            return rec
    except ValueError:
        pass
    raise OtherVersion(f"results: {exp_dir / RECORD} is not a record of an experiment's runs; move it away if the "
                       "folder holds this file's runs (its experiment.yaml is then compared), or give --results "
                       "another folder")


def one_experiment(exp_dir: Path, exp: Experiment, runs: list[RunSpec]) -> None:
    """Refuse exp_dir if it holds another version of `exp` (whose expanded
    runs are `runs`, the whole sweep); record this version if it holds none.
    Nothing is created before a refusal."""
    grid = exp.name.partition("@")[2] or None
    mine = version(exp.name, [r.run_id for r in runs])
    data = _read_no_follow(exp_dir / RECORD) if exp_dir.is_dir() else None
    if data is None and exp_dir.is_dir():  # a folder of before the hash: its experiment.yaml, or its runs
        stored, _ = _stored_experiment(exp_dir, grid)
        if stored is not None and version(stored.name, [r.run_id for r in expand(stored)]) != mine:
            raise _refuse(exp_dir, exp, _why_other(exp_dir, exp, grid, None))
        if stored is None and _read_no_follow(exp_dir / "experiment.yaml") is not None:
            raise _refuse(exp_dir, exp, _stored_experiment(exp_dir, grid)[1])
        ids = {r.run_id for r in runs}
        strays = sorted(p.name for p in exp_dir.iterdir() if RUN_DIR.fullmatch(p.name) and p.name not in ids)
        if strays:
            raise _refuse(exp_dir, exp, f"runs {', '.join(strays[:3])}{' ...' if len(strays) > 3 else ''} "
                                        "are not in this file's sweep")
    found = _parse(exp_dir, data) if data is not None else _record(exp_dir, mine)
    if found is not None and found.get("sha256") != mine["sha256"]:
        raise _refuse(exp_dir, exp, _why_other(exp_dir, exp, grid, found.get("runs")))


def folder_runs(exp_dir: Path, traces: FolderTraces | None = None) -> tuple[frozenset[str] | None, str]:
    """(the run ids of the folder's experiment: its experiment.yaml as the
    folder's grid runs it, checked against experiment.json's hash when there
    is one; "") or (None, why they cannot be known). The folder's grid alone
    is expanded (its other grids are not checked: a reader's question). Its
    traces are read through `traces` (default: a new one), whose `refused`
    then lists what the folder could not give (host/storedtraces.py)."""
    exp_dir = Path(exp_dir)
    f = exp_dir / "experiment.yaml"
    try:
        data = _read_no_follow(f)
        if data is None:
            return None, f"it has no experiment.yaml (the runner copies the file there at the folder's first run)"
        raw = read_yaml(f, "experiment file")
        if not isinstance(raw, dict):
            raise ExperimentError("not a mapping")
        with folder_traces(exp_dir, traces):  # never a trace file the folder names elsewhere (host/storedtraces.py)
            exp = apply_grid(Experiment(**raw), exp_dir.name.partition("@")[2] or None)
            ids = [r.run_id for r in expand(exp)]
    except (OtherVersion, YamlFileError, ExperimentError, ValidationError, ValueError, OSError,
            *safefs.REFUSED) as exc:
        return None, f"its experiment.yaml does not give its runs ({str(exc).splitlines()[0][:200]})"
    recorded = _read_no_follow(exp_dir / RECORD)
    if recorded is not None:
        try:
            found = _parse(exp_dir, recorded)
        except OtherVersion as exc:
            return None, str(exc).split("; ")[0]
        if found.get("sha256") != version(exp.name, ids)["sha256"]:
            return None, (f"its experiment.yaml expands to other runs than {RECORD} records "
                          f"({found.get('runs')} runs): edited after the folder's first run?")
    return frozenset(ids), ""
