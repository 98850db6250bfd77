"""Records that show tampering or damage (`tortoise verify FOLDER`).

`verify_folder` checks, for each run folder of an experiment:

- the manifest (host/manifests.py, written last at store time): a file
  missing, a file the manifest does not list, a file whose size or sha256
  changed, a link. A run without one is not verified, whatever format its
  record claims (a format 3 record was written before manifests, and any
  record can be edited to say 3): named, with the fix. A folder honestly
  stored before manifests is adopted by name (`tortoise verify FOLDER
  --adopt-unmanifested`, host/verifycli.adopt): its manifests are written
  over its files as they are now, which the user then trusts;
- the record: readable and valid (host/store.read_record), and its run id
  the folder's name;
- the run belongs here: its id is a run of the folder's experiment (its
  experiment.yaml as the folder's grid runs it, host/versions.folder_runs);
  a run copied in from another experiment is named ("not a run of ...");
- runs.parquet against the records (host/tablediff.py): a row that differs
  in any column, or a row without a record, names its run. The table is a
  cache of the records: readers rebuild it (store.read_table), so a table
  that is unreadable or merely stale is named with the command that
  rewrites it.

A run named by any of these is what `tortoise report`, `grade` and the
reproduction refuse (or leave out with --skip-damaged, `admitted`); a
damaged one (its manifest or its record fails) is what a resume moves aside
into <exp>/.damaged/<run_id>-<utc>/ and redoes (host/setaside.py,
host/runner.run_experiment), while a run without a manifest that claims an
old format, or one of another experiment, is left where it is for the user
(adopt it, or move it out). Nothing here deletes anything; the words
`tortoise verify` prints are host/verifycli.py's.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa

from tortoiselab.host import labcheck, readfiles, safefs, store, storedtraces, versions
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.manifests import FIRST_VERSION_WITH_MANIFEST, MANIFEST, manifest_differences, run_files, \
    sized_digest
from tortoiselab.host.tablediff import table_differences
from tortoiselab.spec import bounds

RUN_ID = re.compile(r"^[0-9a-f]{12}$")
ADOPT = "--adopt-unmanifested"


class DamagedFolder(RunnerError):
    """A results folder with damaged runs, refused by a reader; the message
    names each run, its file and the fix."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong: run None for the folder's own files (runs.parquet)."""

    run: str | None
    file: Path
    what: str
    fix: str
    redo: bool = True  # a resume moves the run aside and redoes it (not: a record of a newer version)



@dataclass
class FolderCheck:
    exp_dir: Path
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: int = 0

    @property
    def damaged(self) -> dict[str, Path]:
        """Run id -> folder of the runs whose manifest or record fails."""
        return {p.run: self.exp_dir / p.run for p in self.problems
                if p.run and p.redo and p.file.name != store.TABLE}

    @property
    def ok(self) -> bool:
        return not self.problems


def problem_lines(problems: list[Problem], indent: str = "  ") -> list[str]:
    """Each problem on a line of its own, then its fix once per run."""
    out: list[str] = []
    for i, p in enumerate(problems):
        out.append(f"{indent}{'run ' + p.run if p.run else 'folder'}: {p.file}: {p.what}")
        nxt = problems[i + 1] if i + 1 < len(problems) else None
        if nxt is None or (nxt.run, nxt.fix) != (p.run, p.fix):
            out.append(f"{indent}  fix: {p.fix}")
    return out


# --- checking ------------------------------------------------------------------------


def run_folders(exp_dir: Path, run_ids: set[str] | None = None) -> list[Path]:
    """The folders that are, or were, runs: named like a run id, or holding
    a record or a manifest (not the hidden work folders)."""
    out = []
    for d in sorted(Path(exp_dir).iterdir()) if Path(exp_dir).is_dir() else []:
        if d.name.startswith(".") or (run_ids is not None and d.name not in run_ids):
            continue
        if d.is_symlink() or not d.is_dir():
            if RUN_ID.fullmatch(d.name):
                out.append(d)
            continue
        if RUN_ID.fullmatch(d.name) or (d / store.RECORD).exists() or (d / MANIFEST).exists():
            out.append(d)
    return out


def check_run(run_dir: Path) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of one run folder: its manifest and its record."""
    rid, fix = run_dir.name, store.redo_fix(run_dir)
    if run_dir.is_symlink() or not run_dir.is_dir():
        return [Problem(rid, run_dir, "not a folder (a link?): a run is a folder of files", fix)], []
    present, odd = run_files(run_dir)  # a link or a FIFO is named, never opened
    problems = [Problem(rid, run_dir / rel, "not a regular file (a link?)", fix) for rel in odd]
    rec = None
    try:
        if store.RECORD not in odd:
            rec = store.read_record(run_dir)
        if rec is not None and rec.run_id != rid:
            problems.append(Problem(rid, run_dir / store.RECORD, f"its run_id is {rec.run_id}, not the folder's", fix))
    except store.DamagedRecord as exc:
        problems.append(Problem(rid, run_dir / store.RECORD, str(exc).split("; fix: ")[0].split(": ", 2)[-1], fix))
    except store.StoreError as exc:  # a newer version's record: not damaged, not ours to redo
        problems.append(Problem(rid, run_dir / store.RECORD, str(exc), "update tortoiselab", redo=False))
    mf = run_dir / MANIFEST
    if MANIFEST in odd:
        return problems, []
    if not mf.exists():
        version = store.record_version(run_dir) if store.RECORD not in odd else None
        if version is not None and version >= FIRST_VERSION_WITH_MANIFEST:
            problems.append(Problem(rid, mf, f"missing: a record of format {version} is stored with one", fix))
        elif rec is not None:  # an unreadable record is named already
            problems.append(Problem(rid, mf, f"missing: nothing shows its files are those stored (its record says "
                                             f"format {version}, written before manifests, which any edit can "
                                             "say)", adopt_fix(run_dir), redo=False))
        return problems, []
    try:  # not a link nor a FIFO: run_files named those (host/safefs.py)
        listed = json.loads(safefs.read_bytes_regular(mf, doing=f"reading {mf}"))
        listed_files = listed["files"] if isinstance(listed, dict) else None
        if not isinstance(listed_files, dict):
            raise ValueError("no files mapping")
    except (OSError, ValueError, KeyError, TypeError, *safefs.REFUSED) as exc:
        problems.append(Problem(rid, mf, f"unreadable manifest ({exc})", fix))
        return problems, []
    now, unhashed = present_files(present, listed_files)
    differ = dict(manifest_differences(listed_files, now))
    named = {p.file for p in problems}  # a record too large to read is named once
    problems += [Problem(rid, run_dir / rel, unhashed.get(rel) or differ[rel], fix)
                 for rel in sorted(set(differ) | set(unhashed))
                 if not (run_dir / rel in named and "above the" in unhashed.get(rel, ""))]
    return problems, []


def present_files(present: dict[str, Path], listed: dict) -> tuple[dict[str, dict], dict[str, str]]:
    """(relative path -> {"bytes", "sha256"} of the run's files now, relative
    path -> why it was not hashed). Each file is sized first (sized_digest): one
    whose size is not its manifest's, or above its bound, is never hashed
    (its sha256 None), and named by its size alone."""
    now: dict[str, dict] = {}
    unhashed: dict[str, str] = {}
    for rel, p in present.items():
        entry = listed.get(rel)
        expect = entry.get("bytes") if isinstance(entry, dict) else None
        expect = expect if isinstance(expect, int) and not isinstance(expect, bool) else None
        try:
            size, digest = sized_digest(p, expect if entry is not None else None)
        except (OSError, *safefs.REFUSED) as exc:  # replaced since it was listed (a FIFO now): never waited on
            now[rel], unhashed[rel] = {"bytes": None, "sha256": None}, f"not read ({exc})"
            continue
        now[rel] = {"bytes": size, "sha256": digest}
        bound = bounds.read_bound(Path(rel).name)
        if digest is None and expect is not None and size != expect:
            unhashed[rel] = (f"changed since the run was stored: {bounds.size_words(size)} now, "
                             f"{bounds.size_words(expect)} in the manifest (not hashed: the size differs)")
        elif digest is None and size > bound:
            unhashed[rel] = safefs.too_large(p, size, bound).what.replace("not read", "not hashed")
    return now, unhashed


def adopt_fix(run_dir: Path) -> str:
    """What to do about a run without a manifest whose record claims a
    format of before manifests: adopt the folder, or move the run out and
    run it again (a resume does not: it cannot tell such a run from one
    stored before manifests)."""
    exp_dir = Path(run_dir).parent
    grid, aside = exp_dir.name.partition("@")[2], exp_dir / store.DAMAGED
    return (f"if the folder was stored before manifests (format 3 or older) and you trust its files as they are "
            f"now, `tortoise verify {exp_dir} {ADOPT}` writes their manifests; else move the run out (mkdir -p "
            f"{aside} && mv {run_dir} {aside}/) and `tortoise run {exp_dir / 'experiment.yaml'}"
            f"{f' --grid {grid}' if grid else ''} --results {exp_dir.parent}` runs it again")


def check_membership(exp_dir: Path, dirs: list[Path]) -> tuple[list[Problem], list[str]]:
    """The run folders whose id is not a run of the folder's experiment
    (host/versions.folder_runs); when its runs cannot be known, those whose
    record names another experiment, and a note saying why."""
    exp_dir = Path(exp_dir)
    traces = storedtraces.FolderTraces(exp_dir)
    ids, why = versions.folder_runs(exp_dir, traces)
    out, notes = [], []
    if ids is None and traces.refused:  # a trace it names is not the project's nor stored with it: never read
        out.append(Problem(None, exp_dir / "experiment.yaml", f"names a trace its runs cannot be checked against: "
                           f"{traces.refused[0]}", storedtraces.fix_for(exp_dir), redo=False))
    for d in dirs:
        move = f"move it out of {exp_dir} (back where it came from); no reader counts it while it is here"
        if ids is not None and d.name not in ids:
            out.append(Problem(d.name, d, f"not a run of {exp_dir.name} (no run of its experiment.yaml's sweep "
                                          "has this id): copied from elsewhere?", move, redo=False))
        elif ids is None and RUN_ID.fullmatch(d.name) and d.is_dir() and not d.is_symlink():
            try:
                name = store.read_record(d).experiment
            except store.StoreError:
                continue  # named by check_run
            if name != exp_dir.name:
                out.append(Problem(d.name, d, f"not a run of {exp_dir.name} (its record is of {name}): copied "
                                              "from elsewhere?", move, redo=False))
    if ids is None and dirs:
        notes.append(f"its runs are checked by their records' experiment name, not by id: {why}")
    return out, notes


def rebuild_fix(exp_dir: Path) -> str:
    return (f"`tortoise verify {exp_dir} --rebuild-table` rewrites runs.parquet from the run records (reports "
            "already use the records, never the table)")


def check_table(exp_dir: Path, stored: list[store.Stored]) -> tuple[list[Problem], list[str]]:
    """runs.parquet against the table the readable records give."""
    f = Path(exp_dir) / store.TABLE
    if not os.path.lexists(f):
        return [], [f"no {store.TABLE} (readers build the table from the records; {rebuild_fix(exp_dir)})"] \
            if stored else []
    try:
        # a link or a FIFO is named, never followed or opened; a table above its bound, or whose footer
        # holds far more rows than the folder has runs, is never decoded (spec/bounds.py)
        table = readfiles.read_parquet(f, runs=len(stored))
    except safefs.TooLarge as exc:
        return [Problem(None, f, exc.what, rebuild_fix(exp_dir))], []
    except safefs.REFUSED:
        what = f"a link to {safefs.target(f)}" if safefs.is_link(f) else safefs.kind_of(os.lstat(f).st_mode)
        return [Problem(None, f, f"{what}, not a regular file: never read (docs/faults.md)",
                        f"rm {f}; then {rebuild_fix(exp_dir)}")], []
    except (OSError, ValueError, pa.ArrowException) as exc:
        return [Problem(None, f, f"unreadable ({str(exc).splitlines()[0][:200]})", rebuild_fix(exp_dir))], []
    records = store.table_of(st.record for st in stored if st.record is not None)
    unreadable = {st.run_dir.name for st in stored if st.record is None}
    by_run: dict[str, list[str]] = {}
    notes = []
    for rid, col, mine, theirs in table_differences(table, records):
        if col == "(columns)":
            notes.append(f"{f}: another version's columns; readers rebuild it ({rebuild_fix(exp_dir)})")
        elif rid in unreadable:
            continue  # named for its record
        elif col == "(row)" and mine is None:
            notes.append(f"{f}: stale, no row of run {rid} (stored after the table was written); "
                         + rebuild_fix(exp_dir))
        elif col == "(row)":
            by_run.setdefault(rid, []).append(mine if isinstance(mine, str) and rid != mine else
                                              "a row without a run record")
        else:
            by_run.setdefault(rid, []).append(f"{col}: the table says {mine!r}, the record {theirs!r}")
    problems = [Problem(rid, f, "disagrees with the run's record: " + "; ".join(whats[:4])
                        + (f"; and {len(whats) - 4} more columns" if len(whats) > 4 else ""), rebuild_fix(exp_dir))
                for rid, whats in by_run.items()]
    return problems, notes


def lab_problems(exp_dir: Path, sites_dir: Path | None = None) -> list[Problem]:
    """A problem of the folder per file of .lab unlike its generators' (host/labcheck.py;
    its imported sites against the import in sites_dir and the run records)."""
    return [Problem(None, Path(exp_dir) / ".lab" / rel, what, labcheck.fix(Path(exp_dir)), redo=False)
            for rel, what in labcheck.check_lab(Path(exp_dir), sites_dir=sites_dir).differences]


def verify_folder(exp_dir: Path, run_ids: set[str] | None = None, table: bool = True, lab: bool = False,
                  sites_dir: Path | None = None) -> FolderCheck:
    """Every run folder of an experiment (run_ids: only these), then the
    table; lab: its .lab against its generators first (lab_problems)."""
    exp_dir = Path(exp_dir)
    out = FolderCheck(exp_dir)
    if lab:
        out.problems += lab_problems(exp_dir, sites_dir)
    dirs = run_folders(exp_dir, run_ids)
    for d in dirs:
        problems, notes = check_run(d)
        out.problems += problems
        out.notes += notes
        out.runs += 1
    problems, notes = check_membership(exp_dir, dirs)
    out.problems += problems
    out.notes += notes
    if table:
        problems, notes = check_table(exp_dir, store.read_records(exp_dir, run_ids, strict=False))
        out.problems += problems
        out.notes += notes
    return out


def experiment_folders(folder: Path) -> list[Path]:
    """FOLDER itself when it is an experiment's results folder, else the
    experiment folders in it (a results root)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RunnerError(f"verify: {folder}: no such folder; give an experiment's results folder "
                          "(results/<name>@<grid>) or a results root (results)")

    def is_exp(d: Path) -> bool:
        return (d / "experiment.yaml").exists() or (d / store.TABLE).exists() or bool(run_folders(d))

    if is_exp(folder):
        return [folder]
    return [d for d in sorted(folder.iterdir()) if d.is_dir() and not d.is_symlink()
            and not d.name.startswith(".") and is_exp(d)]


# --- readers: refuse, or leave the damaged runs out ------------------------------------


@contextmanager
def admitted(folders: Iterable[Path], skip_damaged: bool, what: str,
             sites_dir: Path | None = None) -> Iterator[list[str]]:
    """Within the block, the folders' damaged runs are left out of every
    reader (store.leaving_out) and the yielded list names them; without
    skip_damaged a folder with damaged runs is refused (DamagedFolder,
    naming each run, its file and the fix). runs.parquet alone is no
    damage: the readers rebuild it from the records. A .lab unlike its
    generators' (lab_problems; its imported sites against the import in
    sites_dir and the run records) damages every run of its folder."""
    damaged: dict[str, Path] = {}
    lab_made: dict[Path, str] = {}  # runs left out for their folder's .lab
    problems: list[Problem] = []
    for d in folders:
        if Path(d).is_dir():
            c = verify_folder(Path(d), table=False)
            damaged.update({f"{c.exp_dir.name}/{p.run}": c.exp_dir / p.run for p in c.problems if p.run})
            problems += [p for p in c.problems if p.run]
            lab = lab_problems(Path(d), sites_dir)  # unlike its generators': every run with it measured other pages
            for r in run_folders(Path(d)) if lab else []:
                damaged[f"{c.exp_dir.name}/{r.name}"] = r
                lab_made[r] = f"made with {c.exp_dir / '.lab'}, which differs from what its generators make " \
                              f"({', '.join(p.file.name for p in lab[:3])}{' ...' * (len(lab) > 3)})"
            problems += lab
    if damaged and not skip_damaged:
        raise DamagedFolder(f"{what}: {len(damaged)} damaged runs ({', '.join(sorted(damaged))}); refused:\n"
                            + "\n".join(problem_lines(problems))
                            + f"\n  or go on without them: {what} --skip-damaged")
    with store.leaving_out(damaged.values()):
        yield [f"left out (damaged): {k}: " + "; ".join(f"{p.file.name + ': ' if p.file != v else ''}{p.what}"
                                                       for p in problems
                                                       if p.run == Path(v).name and p.file.is_relative_to(v))
               + ("; " * any(p.run == Path(v).name for p in problems) + lab_made[v] if v in lab_made else "")
               for k, v in sorted(damaged.items())]
