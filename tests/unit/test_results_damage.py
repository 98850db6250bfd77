"""A property of `tortoise verify` (host/verify.py): whatever damage is done
to copies of a stored results folder (real runs, tests/data/runs, stored
again with manifests), verify names every damaged run and no other, fails
exactly when something is damaged, and changes nothing, inside the folder
or beside it; the runs table a reader gets never disagrees with the
records.

Each kind of damage is a function registered in DAMAGES: it damages the
experiment folder, drawing what it needs from Hypothesis, and says what it
damaged (Damage): among them a run copied in from another experiment and a
record that claims a format of before manifests without one (issue 35
audit, session 8). More kinds (links, stale work folders naming live
foreign pids) are added by registering more functions."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import group_alive
from tests.unit.results_copy import stored_copy, tree
from tortoiselab import cli
from tortoiselab.host import manifests, procid, store, verify
from tortoiselab.host.locks import PROC_RECORD
from tortoiselab.host.tablediff import table_differences

NAME = "tortoise-screen@ci"  # three runs, each run.json, cwnd.json and server.pcap


@dataclass
class Damage:
    runs: set[str] = field(default_factory=set)  # runs verify must name
    table: bool | None = None  # runs.parquet replaced: True unreadable, False readable; None: untouched


DAMAGES: dict[str, Callable[[Path, st.DataObject], Damage]] = {}


def damage(name: str):
    def register(f):
        DAMAGES[name] = f
        return f
    return register


def _runs(exp: Path) -> list[Path]:
    return [d for d in verify.run_folders(exp) if d.is_dir() and not d.is_symlink()]


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink())


@damage("truncate a file")
def truncate(exp: Path, data: st.DataObject) -> Damage:
    files = [f for d in _runs(exp) for f in _files(d) if f.stat().st_size > 0]
    if not files:
        return Damage()
    f = data.draw(st.sampled_from(files), label="truncated")
    f.write_bytes(f.read_bytes()[:data.draw(st.integers(0, f.stat().st_size - 1), label="to bytes")])
    return Damage({f.parent.name})


def _number_paths(x, path=()) -> list[tuple]:
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _number_paths(v, (*path, k))]
    if isinstance(x, list):
        return [p for i, v in enumerate(x) for p in _number_paths(v, (*path, i))]
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return [path] if ok else []


@damage("edit a number in run.json")
def edit_number(exp: Path, data: st.DataObject) -> Damage:
    readable = []
    for d in _runs(exp):
        try:
            readable.append((d, json.loads((d / store.RECORD).read_text())))
        except (OSError, ValueError):
            continue
    readable = [(d, raw) for d, raw in readable if _number_paths(raw)]
    if not readable:
        return Damage()
    d, raw = data.draw(st.sampled_from(readable), label="run")
    path = data.draw(st.sampled_from(_number_paths(raw)), label="number")
    parent = raw
    for k in path[:-1]:
        parent = parent[k]
    old = parent[path[-1]]
    parent[path[-1]] = old + 1 if abs(old) < 1e15 else old * 2
    (d / store.RECORD).write_text(json.dumps(raw, indent=1, sort_keys=True))
    return Damage({d.name})


@damage("add a stray file")
def stray_file(exp: Path, data: st.DataObject) -> Damage:
    d = data.draw(st.sampled_from(_runs(exp)), label="run")
    name = "stray-" + data.draw(st.text("abcdefgh0123456789.", min_size=1, max_size=8), label="name")
    (d / name).write_bytes(data.draw(st.binary(max_size=64), label="bytes"))
    return Damage({d.name})


@damage("delete a file")
def delete_file(exp: Path, data: st.DataObject) -> Damage:
    # a file of the run as stored (deleting a stray file added before would undo that damage)
    files = [f for d in _runs(exp) for f in _files(d) if not f.name.startswith("stray-")]
    if not files:
        return Damage()
    f = data.draw(st.sampled_from(files), label="deleted")
    f.unlink()
    return Damage({f.parent.name})


@damage("replace runs.parquet")
def replace_table(exp: Path, data: st.DataObject) -> Damage:
    """Garbage, or the table with one number of one run changed, with a row
    of a run that does not exist, or with a run's row twice."""
    f = exp / store.TABLE
    how = data.draw(st.sampled_from(["garbage", "cell", "row", "twice"]), label="how")
    try:
        df = pd.read_parquet(f)
    except (OSError, ValueError):
        how = "garbage"
    if how == "garbage":
        f.write_bytes(data.draw(st.binary(max_size=200), label="garbage"))
        return Damage(table=True)
    if how in ("row", "twice"):
        i = data.draw(st.integers(0, len(df) - 1), label="row")
        extra = df.iloc[[i]].copy()
        if how == "row":
            extra["run_id"] = "ffffffffffff"
        pd.concat([df, extra], ignore_index=True).to_parquet(f, index=False)
        return Damage({extra["run_id"].iloc[0]}, table=False)
    cells = [(i, c) for i in range(len(df)) for c in df.columns
             if isinstance(df.at[i, c], float) and math.isfinite(df.at[i, c])]
    i, c = data.draw(st.sampled_from(cells), label="cell")
    df.at[i, c] = df.at[i, c] + 1 if abs(df.at[i, c]) < 1e15 else df.at[i, c] * 2
    df.to_parquet(f, index=False)
    return Damage({df.at[i, "run_id"]}, table=False)


OTHER = "initcwnd@ci"  # another experiment's stored runs, beside the folder: what a copied-in run comes from


@damage("copy in a run of another experiment")
def foreign_run(exp: Path, data: st.DataObject) -> Damage:
    """Seen (issue 35 audit, session 8): verify "3 runs, ok", ls "3/2 done",
    report a traceback."""
    others = [d for d in verify.run_folders(exp.parent / (OTHER if exp.name != OTHER else NAME)) if d.is_dir()]
    if not others:
        return Damage()
    other = data.draw(st.sampled_from(others), label="foreign run")
    rid = other.name
    if not os.path.lexists(exp / rid):
        shutil.copytree(other, exp / rid)  # manifest and all: whole where it came from
    return Damage({rid})


@damage("claim a format of before manifests and drop the manifest")
def downgraded(exp: Path, data: st.DataObject) -> Damage:
    """Seen (issue 35 audit, session 8): format_version 3, plt_ms edited,
    manifest.json removed: verify exit 0, report and grade took the run."""
    records = []
    for d in _runs(exp):
        with contextlib.suppress(OSError, ValueError):
            raw = json.loads((d / store.RECORD).read_text())
            records += [(d, raw)] if isinstance(raw, dict) else []
    if not records:
        return Damage()
    d, raw = data.draw(st.sampled_from(records), label="run")
    raw["format_version"] = data.draw(st.sampled_from([1, 2, 3]), label="format claimed")
    if data.draw(st.booleans(), label="and edit plt_ms") and isinstance(raw.get("summary"), dict):
        raw["summary"]["plt_ms"] = 1.0
    (d / store.RECORD).write_text(json.dumps(raw, indent=1, sort_keys=True))
    if os.path.lexists(d / manifests.MANIFEST):
        (d / manifests.MANIFEST).unlink()
    return Damage({d.name})


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stored") / "results"
    stored_copy(OTHER, root)
    return stored_copy(NAME, root).parent


def _readable_records(exp: Path) -> list[store.RunRecord]:
    return [st.record for st in store.read_records(exp, strict=False) if st.record is not None]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_verify_names_every_damaged_run_and_no_other(base, data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(DAMAGES)), max_size=4), label="damages")
    with tempfile.TemporaryDirectory() as t:
        root = Path(t) / "results"
        shutil.copytree(base, root)
        (Path(t) / "beside").write_text("not the results folder's")
        exp = root / NAME
        in_folders, in_table, garbage = set(), set(), False
        for kind in kinds:
            d = DAMAGES[kind](exp, data)
            if d.table is None:
                in_folders |= d.runs
            elif d.table:  # unreadable: what earlier edits of the table did is gone, and no row names a run
                in_table, garbage = set(), True
            else:
                in_table |= d.runs
        damaged = in_folders | in_table
        before = tree(Path(t))
        check = verify.verify_folder(exp)
        named = {p.run for p in check.problems if p.run}
        assert named == damaged, (kinds, check.problems)
        assert check.ok == (not damaged and not garbage)
        assert tree(Path(t)) == before  # verify reads only
        try:
            df, _ = store.read_table(exp)
        except store.StoreError:  # a damaged record: the reader names it
            assert any(p.file.name == store.RECORD for p in check.problems)
        else:
            assert table_differences(df, store.table_of(_readable_records(exp))) == []


# --- a hostile folder: links out of it, stale work naming a live foreign group -------------
#
# The Must show (issue 35): damaged results folders (truncation, links, stray files,
# edited numbers, stale work folders naming live foreign pids) run through every consumer of a
# folder in turn (`tortoise verify`, `tortoise clean`, store.read_table, `tortoise report`,
# `tortoise ls`), in-process, and the invariants hold: nothing outside the folder changed (each
# victim's bytes and mtime, and no file made beside them), the foreign `sleep` and its group
# still alive, every damaged run named by verify and no other, and no traceback (a refusal is a
# clean message and exit 2). Each kind below is registered in HOSTILE; it may plant links to the
# victims (files and a folder outside the results folder) or name the test's own `sleep`.

HOSTILE_NAME = "initcwnd@ci"  # two runs, and its .lab site: `tortoise ls` and `report` are quick on it


@dataclass
class World:
    """What is outside the results folder: the victims' folder and the foreign process."""

    victims: Path
    sleeper: subprocess.Popen
    files: list[Path] = field(default_factory=list)  # victim files any link may name
    runs: Path | None = None  # victims/<run id>/: a copy of each run, as a run folder linked out would name


HOSTILE: dict[str, Callable[[Path, st.DataObject, World], Damage]] = {}


def hostile(name: str):
    def register(f):
        HOSTILE[name] = f
        return f
    return register


def _plant_link(at: Path, target: Path, data: st.DataObject) -> None:
    """at as a link to target (absolute or relative), in place of whatever was there."""
    if at.is_dir() and not at.is_symlink():
        shutil.rmtree(at)
    elif os.path.lexists(at):
        at.unlink()
    at.parent.mkdir(parents=True, exist_ok=True)
    relative = data.draw(st.booleans(), label="relative link")
    at.symlink_to(os.path.relpath(target, at.parent) if relative else target)


def _victim(data: st.DataObject, world: World) -> Path:
    return data.draw(st.sampled_from(world.files), label="victim")


@hostile("a run's file as a link out of the folder")
def run_file_link(exp: Path, data: st.DataObject, world: World) -> Damage:
    files = [f for d in _runs(exp) for f in _files(d)]
    if not files:
        return Damage()
    f = data.draw(st.sampled_from(files), label="linked file")
    # any victim, or the same file of the run's copy outside (another run's file: test_a_link_to_another_runs_...)
    own = world.runs / f.parent.name / f.name
    _plant_link(f, data.draw(st.sampled_from([*world.files, own]), label="victim"), data)
    return Damage({f.parent.name})


@hostile("a run folder as a link out of the folder")
def run_folder_link(exp: Path, data: st.DataObject, world: World) -> Damage:
    runs = _runs(exp)
    if not runs:
        return Damage()
    d = data.draw(st.sampled_from(runs), label="linked run folder")
    _plant_link(d, world.runs / d.name, data)  # its own copy (another run's: test_a_link_to_another_runs_...)
    return Damage({d.name})


LOCKS = (".lock", ".setup.lock", ".claims/{run}.lock", "experiment.yaml", store.TABLE, "report.html")


@hostile("a lock, claim, experiment.yaml, runs.parquet or report.html as a link")
def folder_file_link(exp: Path, data: st.DataObject, world: World) -> Damage:
    which = data.draw(st.sampled_from(LOCKS), label="linked")
    run = data.draw(st.sampled_from(sorted(RUN_IDS)), label="claim of run")
    # a victim, or a file that does not exist yet (made through the link, were it followed)
    target = _victim(data, world) if data.draw(st.booleans(), label="to a victim") else \
        world.victims / "created-by-tortoise"
    _plant_link(exp / which.format(run=run), target, data)
    # runs.parquet as a link, to a victim or to nothing, is a table verify names (never read; no run)
    return Damage(table=True) if which == store.TABLE else Damage()


@hostile("a lock or claim as a hard link to another lock or a victim")
def hard_linked_lock(exp: Path, data: st.DataObject, world: World) -> Damage:
    """A second name, not a link: O_NOFOLLOW does not see it. To a victim
    (same file system), a lock truncated is the victim truncated; to the
    other lock, the runner would wait on its own flock for ever."""
    which = data.draw(st.sampled_from([".lock", ".setup.lock", ".claims/{run}.lock"]), label="hard-linked")
    at = exp / which.format(run=data.draw(st.sampled_from(sorted(RUN_IDS)), label="claim of run"))
    other = exp / (".setup.lock" if which == ".lock" else ".lock")
    target = _victim(data, world) if data.draw(st.booleans(), label="to a victim") else other
    if not target.exists():
        target.touch()
    if os.path.lexists(at):
        at.unlink()
    at.parent.mkdir(exist_ok=True)
    os.link(target, at)
    return Damage()


def _forged(how: str, pid: int) -> str | None:
    """A uml.proc.json naming pid as a copied, kept or edited folder could
    hold it (never one that matches pid exactly: test_a_record_forged_...)."""
    real = procid.record(pid)
    return {"none": None,
            "another boot": procid.dumps({**real, "boot_id": "00000000-1111-2222-3333-444444444444"}),
            "another start": procid.dumps({**real, "start": real["start"] - 1}),
            "another command": procid.dumps({**real, "cmdline": ["python", "-S", "lab_guard.py", "umid=tl-x"]}),
            "garbage": "{not json"}[how]


# (no record naming any pid but the test's own sleep's: test_locks_safety.py has pid 1, and is_ours refuses it)
FORGERIES = ("none", "another boot", "another start", "another command", "garbage")


@hostile("a stale work folder naming a live foreign group")
def stale_work_folder(exp: Path, data: st.DataObject, world: World) -> Damage:
    run = data.draw(st.sampled_from([*sorted(RUN_IDS), "0123456789ab"]), label="work of run")
    n = data.draw(st.integers(1, 99999), label="n")
    tmp = exp / f".{run}.tmp-{data.draw(st.integers(2, 4_000_000), label='pid'):07d}-{n:05d}"
    if data.draw(st.booleans(), label="-boot"):
        tmp = tmp.with_name(tmp.name + "-boot")
    lab = tmp / "lab"
    lab.mkdir(parents=True, exist_ok=True)
    pid = world.sleeper.pid
    how = data.draw(st.sampled_from(["file", "pgid as a link to a victim naming it"]), label="uml.pgid")
    if how == "file":
        (lab / "uml.pgid").write_text(f"{pid}\n")
    else:
        named = world.victims / "pgid"
        named.write_text(f"{pid}\n") if not named.exists() else None
        _plant_link(lab / "uml.pgid", named, data)
    rec = _forged(data.draw(st.sampled_from(FORGERIES), label="uml.proc.json"), pid)
    if rec is not None:
        (lab / PROC_RECORD).write_text(rec)
    if data.draw(st.booleans(), label="claimed on this host"):
        (exp / ".claims").mkdir(exist_ok=True)
        f = exp / ".claims" / f"{run}.lock"
        if not os.path.lexists(f):
            f.write_text(f"start {socket.gethostname()} 4242 2026-01-01T00:00:00+00:00\n")
    return Damage()


RUN_IDS = {"1072698669c7", "b1a05207aa21"}


@pytest.fixture(scope="module")
def hostile_base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stored") / "results"
    stored_copy(NAME, root)  # the runs a copied-in run comes from
    return stored_copy(HOSTILE_NAME, root).parent


def _victims(t: Path, base: Path) -> list[Path]:
    """Files and a folder outside the results folder, for links to name."""
    v = t / "victims"
    v.mkdir()
    (v / "bashrc").write_text("# a user's shell start-up file\nexport PATH=/usr/bin\n")
    (v / "empty").write_bytes(b"")
    (v / "binary").write_bytes(bytes(range(256)) * 4)
    for rid in RUN_IDS:  # whole runs, as a run folder moved out of the results folder would be
        shutil.copytree(base / HOSTILE_NAME / rid, v / "runs" / rid)
    return sorted(p for p in v.iterdir() if p.is_file())


def _outside(t: Path) -> dict[str, tuple]:
    """Everything beside the results folder: each entry's kind, bytes and mtime."""
    out: dict[str, tuple] = {}
    for p in sorted(t.rglob("*")):
        if p.is_relative_to(t / "results"):
            continue
        s = os.lstat(p)
        out[str(p.relative_to(t))] = (stat.S_IFMT(s.st_mode), s.st_mtime_ns,
                                      p.read_bytes() if stat.S_ISREG(s.st_mode) else None)
    return out


class Hung(Exception):
    pass


def _hung(signum, frame):
    raise Hung("the command waited 15 s (on a lock of its own?)")


def _cli(*argv: str) -> tuple[int, str, str]:
    """tortoiselab.cli.main in-process: (exit code, stdout, stderr); any
    exception (a traceback) fails the test, and so does a command that
    waits (SIGALRM after 15 s interrupts a flock)."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _hung)
    signal.setitimer(signal.ITIMER_REAL, 15)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # matplotlib's layout warnings are no message of the CLI's
            rc = cli.main(list(argv))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def _clean_refusal(rc: int, err: str, what: str) -> None:
    # clean: 1 when it left something in place for the user (docs/running.md, "Exit codes")
    assert rc in ((0, 1, 2) if what == "clean" else (0, 2)), (what, rc, err)
    if rc == 2:  # a refusal: one message (it may run over lines), no traceback
        assert err.startswith("tortoise: ") and "Traceback" not in err, (what, err)


@pytest.fixture
def sigterm_kept():
    """cli.main sets a SIGTERM handler: pytest's is put back."""
    old = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _alive(p: subprocess.Popen) -> bool:
    try:
        p.wait(timeout=0.05)
    except subprocess.TimeoutExpired:
        return group_alive(p.pid)
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hostile_folder_harms_nothing_outside_and_verify_names_every_damaged_run(hostile_base, sigterm_kept,
                                                                                   data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(DAMAGES)), max_size=2), label="damages")
    hostile_kinds = data.draw(st.lists(st.sampled_from(sorted(HOSTILE)), min_size=1, max_size=3), label="hostile")
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)  # foreign to any lab: a group of its own
    try:
        with tempfile.TemporaryDirectory() as tdir:
            t = Path(tdir)
            root = t / "results"
            shutil.copytree(hostile_base, root)
            exp = root / HOSTILE_NAME
            world = World(t / "victims", sleeper)
            world.files, world.runs = _victims(t, hostile_base), world.victims / "runs"
            in_folders, in_table, garbage = set(), set(), False
            # the plain damages first: they write files of the folder, and a link planted before would carry
            # the test's own write out of the folder
            for d in [DAMAGES[k](exp, data) for k in kinds] + [HOSTILE[k](exp, data, world) for k in hostile_kinds]:
                if d.table is None:
                    in_folders |= d.runs
                elif d.table:  # unreadable: what earlier edits of the table did is gone
                    in_table, garbage = set(), True
                else:
                    in_table |= d.runs
            damaged = in_folders | in_table
            outside = _outside(t)

            check = verify.verify_folder(exp)
            named = {p.run for p in check.problems if p.run}
            rc, out, err = _cli("verify", str(exp))
            assert rc == (0 if check.ok else 1) and not err, (rc, err)
            assert all(r in out for r in named), out

            rc, out, err = _cli("clean", "--results", str(root))
            _clean_refusal(rc, err, "clean")
            assert "killed" not in out, out
            try:
                store.read_table(exp)
            except store.StoreError as exc:  # refusing is fine: a message that names the run's folder
                assert str(exp) in str(exc), exc
            _clean_refusal(*_cli("report", str(exp))[::2], "report")
            _clean_refusal(*_cli("ls", "--results", str(root))[::2], "ls")

            assert _alive(sleeper), f"{hostile_kinds}: the foreign sleep {sleeper.pid} or its group was signalled"
            assert _outside(t) == outside, f"{kinds} {hostile_kinds}: something outside the results folder changed"
            assert named == damaged, (kinds, hostile_kinds, check.problems)
            assert check.ok == (not damaged and not garbage), check.problems
    finally:
        if sleeper.poll() is None:
            sleeper.kill()  # by its own pid
        sleeper.wait(timeout=10)


# --- what the property leaves out, as tests of their own ------------------------------------

@pytest.fixture
def hostile_copy(hostile_base, tmp_path) -> tuple[Path, Path]:
    """(experiment folder of a fresh copy, victims folder beside it)."""
    shutil.copytree(hostile_base, tmp_path / "results")
    _victims(tmp_path, hostile_base)
    return tmp_path / "results" / HOSTILE_NAME, tmp_path / "victims"


@pytest.mark.parametrize("what", ["run folder", "run.json"])
def test_a_link_to_another_runs_record_names_only_the_linked_run(hostile_copy, what):
    exp, victims = hostile_copy
    linked, other = sorted(RUN_IDS)[1], sorted(RUN_IDS)[0]
    if what == "run folder":
        shutil.rmtree(exp / linked)
        (exp / linked).symlink_to(victims / "runs" / other)
    else:
        (exp / linked / store.RECORD).unlink()
        (exp / linked / store.RECORD).symlink_to(victims / "runs" / other / store.RECORD)
    check = verify.verify_folder(exp)
    assert {p.run for p in check.problems if p.run} == {linked}, check.problems


LINKED = {  # what is linked out of the folder -> (path in the experiment folder, victim)
    "run.json": ("b1a05207aa21/run.json", "runs/b1a05207aa21/run.json"),
    "server.pcap": ("b1a05207aa21/server.pcap", "binary"),
    "manifest.json": ("b1a05207aa21/manifest.json", "runs/b1a05207aa21/manifest.json"),
    "run folder": ("b1a05207aa21", "runs/b1a05207aa21"),
    "experiment.yaml": ("experiment.yaml", "bashrc"),
    "runs.parquet": (store.TABLE, "binary"),
    ".lock": (".lock", "bashrc"),
    "report.html": ("report.html", "bashrc"),
    "claim of a stale run": (".claims/b1a05207aa21.lock", "bashrc"),
    "uml.pgid of a stale run": (".b1a05207aa21.tmp-0000002-00001/lab/uml.pgid", "pgid"),
}
@pytest.mark.parametrize("kind", list(LINKED))
def test_no_consumer_reads_a_victim_through_a_link(hostile_copy, sigterm_kept, kind):
    """Beyond "nothing outside changed": nothing outside is even read. The
    victim's atime is set before its mtime and ctime, so that a read
    through the link moves it (relatime)."""
    exp, victims = hostile_copy
    at, victim = exp / LINKED[kind][0], victims / LINKED[kind][1]
    (victims / "pgid").write_text("not a pid\n")  # no process's, whatever reads it
    if at.is_dir() and not at.is_symlink():
        shutil.rmtree(at)
    elif os.path.lexists(at):
        at.unlink()
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(victim)
    files = [victim] if victim.is_file() else sorted(p for p in victim.rglob("*") if p.is_file())
    for f in files:
        s = os.stat(f)
        os.utime(f, ns=(s.st_mtime_ns - 10**10, s.st_mtime_ns))
    before = {f: os.stat(f).st_atime_ns for f in files}
    _cli("verify", str(exp))
    _clean_refusal(*_cli("clean", "--results", str(exp.parent))[::2], "clean")
    with contextlib.suppress(store.StoreError):
        store.read_table(exp)
    _clean_refusal(*_cli("report", str(exp))[::2], "report")
    _clean_refusal(*_cli("ls", "--results", str(exp.parent))[::2], "ls")
    assert {f: os.stat(f).st_atime_ns for f in files} == before, f"{kind}: a victim was read through the link"


def test_a_record_forged_from_proc_makes_no_foreign_group_a_lab(hostile_copy, sigterm_kept):
    exp, _ = hostile_copy
    sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)  # foreign: a group of its own
    try:
        lab = exp / ".b1a05207aa21.tmp-0000002-00001-boot" / "lab"
        lab.mkdir(parents=True)
        (lab / "uml.pgid").write_text(str(sleeper.pid))
        (lab / PROC_RECORD).write_text(procid.dumps(procid.record(sleeper.pid)))  # read from /proc, as anyone can
        rc, out, err = _cli("clean", "--results", str(exp.parent))
        assert _alive(sleeper), out
        assert rc == 0 and f"did not signal process group {sleeper.pid}" in out, (out, err)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()  # by its own pid
        sleeper.wait(timeout=10)


@pytest.mark.parametrize("lock,to", [(".setup.lock", ".lock"), (".lock", "victims/bashrc"),
                                     (".claims/b1a05207aa21.lock", "victims/bashrc")])
def test_a_lock_with_a_second_name_is_refused_not_waited_on_or_truncated(hostile_copy, sigterm_kept, lock, to):
    """A hard link is no symlink: O_NOFOLLOW opens it. Before: `tortoise
    clean` waited for ever on its own flock (.setup.lock as .lock's second
    name), or truncated the file outside the folder that .lock named."""
    exp, victims = hostile_copy
    target = victims / to.removeprefix("victims/") if to.startswith("victims/") else exp / to
    target.touch()
    if lock.startswith(".claims"):  # the claim a stale work folder's run is probed by
        (exp / ".claims").mkdir()
        (exp / ".b1a05207aa21.tmp-0000002-00001" / "lab").mkdir(parents=True)
    os.link(target, exp / lock)
    before = target.read_bytes()
    rc, out, err = _cli("clean", "--results", str(exp.parent))
    assert target.read_bytes() == before, "the file outside the folder was truncated through the lock"
    named = exp / (".lock" if to == ".lock" else lock)  # of two names in the folder, the one opened first
    # exit 1: clean left something in place for the user (docs/running.md, "Exit codes")
    assert rc == 1 and f"{named} has 2 names (a hard link to another file)" in out, (out, err)
    assert f"remove it (rm {named})" in out
