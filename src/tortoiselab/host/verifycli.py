"""`tortoise verify FOLDER` in words: each folder's check (host/verify.py)
printed run by run with its fix, the table rewritten on request, and the
runs stored before manifests adopted by name (--adopt-unmanifested)."""

from __future__ import annotations

from pathlib import Path

from tortoiselab.host import store
from tortoiselab.host.locks import claim, setup_lock
from tortoiselab.host.manifests import MANIFEST, write_manifest
from tortoiselab.host.verify import FolderCheck, Problem, experiment_folders, problem_lines, verify_folder


def _folder_failing(c: FolderCheck) -> str:
    """What fails when no run does: the table, the experiment file, or both."""
    return " and ".join(what for what, name in (("experiment.yaml failing", "experiment.yaml"),
                                                ("table failing", store.TABLE))
                        if any(p.file.name == name for p in c.problems)) or "failing"


def format_checks(checks: list[FolderCheck]) -> str:
    lines = []
    for c in checks:
        runs = sorted({p.run for p in c.problems if p.run})
        lab = any(p.run is None and p.file.is_relative_to(c.exp_dir / ".lab") for p in c.problems)
        lines.append(f"{c.exp_dir}: {c.runs} runs, " + (f"{len(runs)} failing: {', '.join(runs)}" if runs else
                                                          ".lab failing" if lab else
                                                          _folder_failing(c) if c.problems else "ok"))  # not a column
        lines += problem_lines(c.problems)
        lines += [f"  note: {n}" for n in c.notes]
    return "\n".join(lines)


def unmanifested(check: FolderCheck) -> list[str]:
    """The runs of a check whose one problem is a missing manifest under a
    record of format 3 or older: what adopt takes."""
    by_run: dict[str, list[Problem]] = {}
    for p in check.problems:
        if p.run:
            by_run.setdefault(p.run, []).append(p)
    return sorted(r for r, ps in by_run.items()
                  if len(ps) == 1 and ps[0].file.name == MANIFEST and not ps[0].redo)


def adopt(check: FolderCheck) -> list[str]:
    """Write the manifest of every run `unmanifested` names, over its files
    as they are now (under the folder's set-up lock and each run's claim);
    returns a line per run. A run with any other problem is not adopted."""
    lines = []
    with setup_lock(check.exp_dir):
        for rid in unmanifested(check):
            with claim(check.exp_dir, rid):
                again = verify_folder(check.exp_dir, {rid}, table=False)
                if unmanifested(again) == [rid]:
                    write_manifest(check.exp_dir / rid, bounded=True)  # files of unknown origin
                    lines.append(f"adopted {check.exp_dir / rid}: wrote its {MANIFEST} over its files as they are "
                                 "now (trusted as stored: nothing showed whether they had been changed)")
    return lines


def cli_verify(folder: Path, rebuild_table: bool = False, adopt_unmanifested: bool = False,
               sites_dir: Path | None = None) -> int:
    """`tortoise verify FOLDER`: 0 when every run and table is whole, 1
    otherwise; with adopt_unmanifested, runs stored before manifests get
    theirs first (adopt). sites_dir: the imported sites a folder's staged
    copies are compared with (host/sitecheck.py)."""
    checks = [verify_folder(d, lab=True, sites_dir=sites_dir) for d in experiment_folders(folder)]
    if not checks:
        print(f"{folder}: no experiment folders")
        return 0
    if adopt_unmanifested:
        lines = [line for c in checks for line in adopt(c)]
        print("\n".join(lines) if lines else "adopt: no run without a manifest to adopt")
        checks = [verify_folder(c.exp_dir, lab=True, sites_dir=sites_dir) for c in checks]
    if rebuild_table:
        for c in checks:
            if any(p.file.name == store.TABLE for p in c.problems) or any(store.TABLE in n for n in c.notes):
                with setup_lock(c.exp_dir):
                    print(f"rewrote {store.rebuild_table(c.exp_dir)} from the run records")
        checks = [verify_folder(c.exp_dir, lab=True, sites_dir=sites_dir) for c in checks]
    print(format_checks(checks))
    bad = [c for c in checks if not c.ok]
    print(f"verify: {len(bad)} of {len(checks)} folders failing" if bad else f"verify: {len(checks)} folders ok")
    return 1 if bad else 0
