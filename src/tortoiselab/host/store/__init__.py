"""The one owner of a results folder: the run record (run.json) as a typed,
versioned model, its one upgrade path for folders written by older
versions, and the runs table (runs.parquet) whose schema is host/columns.py.
The store is also the folder's only writer: every write in it goes through
host/store/files.py (tests/unit/test_one_writer.py). Every reader (the
runner's listing, the report, the studies, the grader, the notebooks) loads runs through `load_runs` or `read_records`;
nobody else parses run.json (docs/architecture.md).

    results/<experiment>/<run_id>/run.json   one RunRecord per completed run
    results/<experiment>/runs.parquet        one row per completed run

Format versions:
  1  (no `format_version` key) written before this module existed: the
     PLT floor may be missing from `summary`, `config.path.resolved` may be
     missing (the resolved path is then the record's `path`), `meta` may lack
     keys.
  2  every key of RunRecord present, `summary.floor_ms` set
     (None where it could not be computed).
  3  meta.batch (runs sharing a lab boot).
  4  the run folder holds manifest.json, written last, with the
     sha256 of run.json and of every other file (host/verify.py); a folder of
     format 3 or older has none.
  5  meta.batch.id, .replayed, .replays_differing: the batch
     is fixed by the experiment file (host/batches.py) and meta.batch.runs
     is the whole batch, of which the run's boot loaded the first index+1
     (in format 3 and 4, the runs its boot loaded; id None).
     A run folder may also hold connections.json, its server capture's
     connections table (host/store/captures.py), written since issue 40
     with no change of format: the record is the same, and a folder
     without the table is read by parsing its capture.
  6  this version: the typed record: summary, connections, fidelity,
     capture, cross, cdn, path and meta.load_cpu are models of
     spec/measured.py, so no part is a free-form object; a run without a
     load has summary None (an empty object before).
"""

from __future__ import annotations

import io
import json
import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tortoiselab.analysis import napkin
from tortoiselab.host import readfiles, safefs
from tortoiselab.host.columns import COLUMNS, NUMERIC, row
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store import files
from tortoiselab.host.storedtraces import folder_traces
from tortoiselab.host.tablediff import table_differences
from tortoiselab.spec import cols
from tortoiselab.spec.measured import (Captures, CdnPart, CrossTraffic, FidelityCheck, JsonTree, LoadCpu, LoadSummary,
                                       ServerConnection, StoredPath)

# 6: the typed record (spec/measured.py); 5: fixed batches (meta.batch.id); 4: manifest.json beside the record;
# 3: meta.batch
FORMAT_VERSION = 6
RECORD = readfiles.RECORD
TABLE = "runs.parquet"
DAMAGED = ".damaged"  # <exp>/.damaged/<run_id>-<utc>/: damaged runs moved aside by a resume (host/verify.py)
KILLED = ".killed"  # <exp>/.killed/<run_id>-<utc>/: failed runs whose lab was killed from outside, moved aside
# by the next run and redone (host/setaside.move_killed_aside)


class StoreError(RunnerError):
    """A results folder or run record that cannot be read; the message names
    it and the fix (a RunnerError: the CLI prints it, exit 2)."""


class DamagedRecord(StoreError):
    """A run.json that is not a record (truncated, edited, not JSON): the
    run is damaged, not from a newer version."""


class BatchMeta(BaseModel):
    """Where a run sat in its batch (host/batches.py): a run alone is index
    0 of a batch of size 1."""

    model_config = ConfigDict(extra="forbid")
    index: int  # its load's place in the boot (and in the batch)
    size: int  # runs in the batch (format 3, 4: loads the boot was asked for)
    boot_sim_seconds: float  # guest time from boot to the first load's set-up (0.0 for the later loads)
    start_s: float | None = None  # the guest's monotonic clock when the load started (None: it failed first)
    runs: list[str] = Field(default_factory=list)  # the batch's runs in their order: a rerun of its first
    # index+1 repeats this run to the microsecond (docs/determinism.md, "Batches")
    id: str | None = None  # host/batches.batch_id of runs (None: stored before format 5)
    replayed: list[str] = Field(default_factory=list)  # earlier runs of the batch its boot loaded again, unstored
    replays_differing: list[str] = Field(default_factory=list)  # of those, the ones whose PLT or bytes
    # differed from their stored record (empty: all reproduced, or none replayed)


class RunMeta(BaseModel):
    """How and where a run ran. A run whose lab failed has only the times."""

    model_config = ConfigDict(extra="forbid")
    backend: str | None = None  # native | uml
    clock: str | None = None  # real | virtual
    kernel_release: str | None = None
    kernel: str | None = None  # path of the UML kernel binary
    switch: str | None = None  # ovs | bridge
    modules: dict[str, dict[str, str]] = Field(default_factory=dict)  # our modules' parameters as read back
    server_sysctls: dict[str, str] = Field(default_factory=dict)  # the server's TCP and host settings as read back
    client_sysctls: dict[str, str] = Field(default_factory=dict)  # the client's host settings as read back
    # (spec/hostspec.READ_BACK; empty: stored before hosts could be set)
    server_route: str | None = None
    tools: dict[str, str | bool] = Field(default_factory=dict)  # tool versions, git revision (host/provenance.py)
    sim_seconds: float | None = None  # guest time of the run: boot to its load's end, or (later in a
    # batch) from the end of the previous load, the wait for its start instant included
    load_sim_seconds: float | None = None  # guest time of the page load
    # every seed the run used, by name (host/provenance.run_seeds: netem's are named per leg and direction)
    seeds: dict[str, int | str | None] = Field(default_factory=dict)
    code: str | None = None  # sha256 of the lab code that ran (guest code_digest)
    guest_boot_id: str | None = None
    uml_userspace: str | None = None  # uml: seccomp | ptrace, how the guest's processes ran on the host
    started: str | None = None  # UTC, ISO 8601
    ended: str | None = None
    wall_seconds: float | None = None  # host time since the previous run of its batch was stored
    batch: BatchMeta | None = None  # None: stored before batches (format 2)
    phases: dict[str, float] = Field(default_factory=dict)  # wall seconds by phase (host/runner.phases_of_load)
    # uml: the lab's host CPU over the load's interval, by group (host/labcpu.load_cpu; docs/speed.md)
    load_cpu: LoadCpu | None = None
    reused_from: str | None = None  # taken unchanged from this folder's run of the same id (host/reuse.py)


class RunRecord(BaseModel):
    """run.json: one completed run, ok or failed, whole."""

    model_config = ConfigDict(extra="forbid")
    format_version: int = FORMAT_VERSION
    run_id: str
    experiment: str  # <name> or <name>@<grid>
    repetition: int
    seed: int
    point: dict[str, JsonTree] = Field(default_factory=dict)  # the sweep values of this run
    config: dict[str, JsonTree]  # the id form (spec/idform.py); config.path.resolved is the path that ran
    path: StoredPath  # the resolved PathSpec
    ok: bool
    error: str | None = None
    summary: LoadSummary | None = None  # the loader's summary and the store's figures; None: no load
    connections: list[ServerConnection] = Field(default_factory=list)  # per connection, from the server capture
    capture: Captures = Field(default_factory=Captures)  # tcpdump's counters per side
    fidelity: list[FidelityCheck] = Field(default_factory=list)  # configured vs measured (analysis.fidelity)
    # a shared bottleneck's cross traffic during the load: every flow and the bytes it moved (guest/cross.py)
    cross: CrossTraffic | None = None
    # the CDN set-up's CDN host (spec/cdn.py): its address, TCP settings as read back, capture counters,
    # connections, and which host served which objects (analysis/servedby.py); None: one server
    cdn: CdnPart | None = None
    meta: RunMeta = Field(default_factory=RunMeta)


# --- reading and writing records ---------------------------------------------------


def write_record(run_dir: Path, record: dict | RunRecord) -> RunRecord:
    """Validate a record and write run_dir/run.json (the runner renames the
    whole folder into place afterwards, so a run appears whole or not at all)."""
    rec = record if isinstance(record, RunRecord) else RunRecord.model_validate(record)
    # whole (a temporary, renamed), never through a link, never into a file of another run's (a hard link
    # of a reused run's record is replaced, not written through: host/reuse.py)
    files.write_file(Path(run_dir).parent, Path(run_dir) / RECORD,
                     json.dumps(rec.model_dump(mode="json"), indent=1, sort_keys=True, default=str))
    return rec


def record_problem(record: dict) -> str | None:
    """Why a record the runner assembled is not a RunRecord (the first
    field that fails, e.g. a key a lab part writes that spec/measured.py
    does not name), or None when it is one."""
    try:
        RunRecord.model_validate(record)
    except ValidationError as exc:
        return _first_error(exc)[:500]
    return None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"


def upgrade(raw: dict, run_dir: Path | None = None) -> dict:
    """A run.json of any earlier format as the current one. run_dir's
    experiment folder supplies the lab's site and PKI where a version-1
    record lacks its PLT floor. Pure apart from reading those two files."""
    raw = dict(raw)
    version = raw.get("format_version", 1)
    if version > FORMAT_VERSION:
        raise StoreError(f"{run_dir or 'run record'}: format_version {version} is newer than this "
                         f"tortoiselab ({FORMAT_VERSION}); update the project to read it")
    if version == 1:
        raw = _upgrade_1_to_2(raw, run_dir)
    if raw["format_version"] == 2:  # a boot per run: nothing to change, meta.batch stays None
        raw["format_version"] = 3
    if raw["format_version"] == 3:  # no manifest: nothing to change in the record
        raw["format_version"] = 4
    if raw["format_version"] == 4:  # no batch id: the new fields keep their defaults
        raw["format_version"] = 5
    if raw["format_version"] == 5:
        raw = _upgrade_5_to_6(raw)
    return raw


def _upgrade_5_to_6(raw: dict) -> dict:
    """The typed record (spec/measured.py): a run without a load had an
    empty summary, now none; the rest was already of the typed shapes."""
    if not raw.get("summary"):
        raw["summary"] = None
    raw["format_version"] = 6
    return raw


def _upgrade_1_to_2(raw: dict, run_dir: Path | None) -> dict:
    cfg = dict(raw.get("config") or {})
    path_cfg = dict(cfg.get("path") or {})
    if "resolved" not in path_cfg and raw.get("path"):
        path_cfg["resolved"] = raw["path"]
    cfg["path"] = path_cfg
    raw["config"] = cfg
    raw.setdefault("path", path_cfg.get("resolved") or {})
    summary = dict(raw.get("summary") or {})
    if cols.FLOOR not in summary:
        summary.update(_floor_of_old_run(raw, summary, run_dir))
    raw["summary"] = summary
    for key, default in (("point", {}), ("connections", []), ("capture", {}), ("fidelity", []), ("meta", {})):
        if raw.get(key) is None:
            raw[key] = default
    raw["meta"] = {k: v for k, v in raw["meta"].items() if k in RunMeta.model_fields}
    raw["format_version"] = 2
    return raw


def _floor_of_old_run(raw: dict, summary: dict, run_dir: Path | None) -> dict:
    """The napkin floor a version-2 runner stores, computed the same way
    (analysis.napkin.run_floor) from the experiment's site and PKI."""
    exp_dir = Path(run_dir).parent if run_dir is not None else None
    try:  # neither through a link nor from a FIFO (host/safefs.py)
        manifest, pki = readfiles.lab_json(exp_dir, "site"), readfiles.lab_json(exp_dir, "pki")
        with folder_traces(exp_dir):  # a traced path's trace: the project's or the folder's copy, never elsewhere
            f = napkin.run_floor(raw["config"], manifest, pki, summary.get("cached_urls") or (),
                                 summary.get("trace_start_ms"))
    except (OSError, TypeError, ValueError, KeyError, *safefs.REFUSED) as exc:
        return {cols.FLOOR: None, "plt_over_floor": None, "floor_model": {"why": f"floor not computed: {exc}"[:300]}}
    floor = f[cols.FLOOR]
    return {cols.FLOOR: floor, "plt_over_floor": napkin.ratio(summary.get(cols.PLT), floor) if floor else None,
            "floor_model": f.get("model") or {"why": f.get("why")}}


def redo_fix(run_dir: Path) -> str:
    """How to get a damaged run done again: a resume of its experiment moves
    the folder aside (into <exp>/.damaged/, kept) and redoes the run."""
    exp_dir = Path(run_dir).parent
    grid = exp_dir.name.partition("@")[2]
    return (f"`tortoise run {exp_dir / 'experiment.yaml'}{f' --grid {grid}' if grid else ''} --results "
            f"{exp_dir.parent}` moves the run's folder aside into {exp_dir / DAMAGED}/ (kept) and redoes it; "
            f"`tortoise verify {exp_dir}` lists every damaged run")


def read_record(run_dir: Path) -> RunRecord:
    """run_dir/run.json, upgraded to the current format and validated; a
    damaged one raises DamagedRecord naming the run, the file and the fix."""
    f = Path(run_dir) / RECORD
    try:
        raw = json.loads(readfiles.record_bytes(run_dir))
        if not isinstance(raw, dict):
            raise ValueError(f"a JSON {type(raw).__name__}, not an object")
    except safefs.TooLarge as exc:  # above its bound: sized by fstat, never read (spec/bounds.py)
        raise DamagedRecord(f"run {Path(run_dir).name}: {f}: {exc.what}; fix: {redo_fix(run_dir)}") from None
    except safefs.REFUSED as exc:  # a link or a FIFO: named with its fix, never followed or opened
        raise DamagedRecord(f"run {Path(run_dir).name}: {f}: not read: {exc}; then {redo_fix(run_dir)}") from None
    except (OSError, ValueError) as exc:
        raise DamagedRecord(f"run {Path(run_dir).name}: {f}: unreadable run record ({exc}); fix: "
                            f"{redo_fix(run_dir)}") from None
    try:
        return RunRecord.model_validate(upgrade(raw, Path(run_dir)))
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, ValidationError):
            why = _first_error(exc)
        else:
            why = f"not a run record ({type(exc).__name__}: {exc})"
        raise DamagedRecord(f"run {Path(run_dir).name}: {f}: {why}; fix: {redo_fix(run_dir)}") from None


def record_version(run_dir: Path) -> int | None:
    """The format_version run_dir/run.json was written with (1 without the
    key), None when it is unreadable: whether the folder should have a
    manifest (format 4 on)."""
    try:
        raw = json.loads(readfiles.record_bytes(run_dir))
        v = raw.get("format_version", 1) if isinstance(raw, dict) else None
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    except (OSError, ValueError, *safefs.REFUSED):
        return None


# run folders readers leave out (leaving_out: the damaged runs a report, grade or
# reproduction goes on without, --skip-damaged): (experiment folder's real path, run id)
_LEFT_OUT: ContextVar[frozenset[tuple[str, str]]] = ContextVar("left_out", default=frozenset())


@contextmanager
def leaving_out(dirs: Iterable[Path]) -> Iterator[None]:
    """Within the block, run_dirs (so every reader) skips these run folders."""
    keys = frozenset((os.path.realpath(Path(d).parent), Path(d).name) for d in dirs)
    token = _LEFT_OUT.set(_LEFT_OUT.get() | keys)
    try:
        yield
    finally:
        _LEFT_OUT.reset(token)


def run_dirs(exp_dir: Path, run_ids: set[str] | None = None) -> list[Path]:
    """Completed runs' folders, sorted by run id (not the hidden work
    folders of runs in progress). run_ids: only these. No link is followed
    (a run folder that is a link is listed, and refused by read_record)."""
    out = []
    left_out = _LEFT_OUT.get()
    real = os.path.realpath(exp_dir) if left_out else ""
    for name in readfiles.names(exp_dir):
        if name.startswith(".") or (run_ids is not None and name not in run_ids) or (real, name) in left_out:
            continue
        if readfiles.is_run(exp_dir, name):
            out.append(Path(exp_dir) / name)
    return out


@dataclass(frozen=True)
class Stored:
    """A record and where it is."""

    run_dir: Path
    record: RunRecord | None  # None when unreadable
    error: str | None = None


def read_records(exp_dir: Path, run_ids: set[str] | None = None, strict: bool = True) -> list[Stored]:
    """Every completed run of a folder. strict: an unreadable record raises
    StoreError; otherwise it comes back with record None and the error, so
    a listing or a grader can report it instead of failing."""
    out = []
    for d in run_dirs(exp_dir, run_ids):
        try:
            out.append(Stored(d, read_record(d)))
        except StoreError as exc:
            if strict:
                raise
            out.append(Stored(d, None, str(exc)))
    return out


def completed(exp_dir: Path, run_id: str) -> bool:
    """A record is stored for run_id (looked at without following a link:
    a run folder that is a link counts, as a damaged run readers name)."""
    return readfiles.is_run(exp_dir, run_id)


# --- the runs table ------------------------------------------------------------------


Extra = Mapping[str, Callable[[RunRecord], Any]]


def load_runs(exp_dir: Path, run_ids: set[str] | None = None, extra: Extra | None = None) -> pd.DataFrame:
    """One row per completed run, read from the run folders (so a folder
    whose runner is still at work gives what is done so far): the runs
    table's columns, then `extra` (name -> function of the record), then
    run_dir. Numeric columns are numbers (NaN where a run has none)."""
    extra = dict(extra or {})
    rows = []
    for st in read_records(Path(exp_dir), run_ids):
        r = row(st.record)
        r.update({name: f(st.record) for name, f in extra.items()})
        r["run_dir"] = str(st.run_dir)
        rows.append(r)
    df = pd.DataFrame(rows, columns=[*COLUMNS, *extra, "run_dir"])
    for col in NUMERIC:
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def rebuild_table(exp_dir: Path) -> Path:
    """runs.parquet from the run folders, one row per completed run, sorted
    by run id; the same folders give the same table (written atomically)."""
    df = load_runs(exp_dir).drop(columns=["run_dir"])
    df = df.sort_values(cols.RUN_ID).reset_index(drop=True) if len(df) else df
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    out = Path(exp_dir) / TABLE
    files.write_file(Path(exp_dir), out, buf.getvalue(), doing=f"writing {out}")
    return out


def table_of(records: Iterable[RunRecord]) -> pd.DataFrame:
    """The runs table of these records, as rebuild_table writes it (rows
    sorted by run id)."""
    df = pd.DataFrame([row(r) for r in sorted(records, key=lambda r: r.run_id)], columns=list(COLUMNS))
    for col in NUMERIC:
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def read_table(exp_dir: Path) -> tuple[pd.DataFrame, bool]:
    """(runs table, rebuilt): runs.parquet when every row and column of it
    agrees with the run records, else the table rebuilt in memory from the
    records (rebuilt True when a runs.parquet was there: unreadable, of
    another version's columns, stale, or edited). runs.parquet is a cache
    of the records and never trusted over them (`tortoise verify` names the
    rows that differ)."""
    table = Path(exp_dir) / TABLE
    records = table_of(st.record for st in read_records(exp_dir))
    if os.path.lexists(table):
        try:
            df = readfiles.read_parquet(table, runs=len(records))  # rows counted in its footer
        except (OSError, ValueError, pa.ArrowException, *safefs.REFUSED):  # garbage, a link, a FIFO, a
            return records, True  # bomb: the records give the table (tortoise verify names the file and the fix)
        if not table_differences(df, records):
            return df, False
    return records, os.path.lexists(table)

