"""The course labs as a student runs them: each handout's "What to run"
commands, as written, timed against the handout's promise
(`expected_minutes` in its front matter), and `tortoise grade` must say
complete (issue 23; labs/README.md, "How long a lab takes").

    .venv/bin/python bench/labs.py [--labs 01,04] [--keep DIR]

The commands run in a scratch clone of this repository's HEAD (its .venv is
this one's, linked), so that results/ here is never touched and each lab
starts from nothing, as in a student's fresh checkout; the lab kernel comes
from the shared cache. Figures, not assertions: a table of each command's
wall time, the lab's total against its promise, and the grade's verdict;
the exit status is 1 when a command failed or a grade is not complete.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from tortoiselab.course.handout import load_lab  # noqa: E402


def what_to_run(handout: Path) -> list[str]:
    """The tortoise commands of the handout's first sh block under its
    "What to run" heading, comments stripped, in order."""
    text = handout.read_text()
    section = re.search(r"^## What to run\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        raise SystemExit(f"{handout}: no '## What to run' section")
    block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    if not block:
        raise SystemExit(f"{handout}: no ```sh block under 'What to run'")
    lines = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    return [ln for ln in lines if ln]


def scratch_clone(keep: Path | None) -> Path:
    """A clone of HEAD with this checkout's .venv linked in."""
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="tortoise-labs-"))
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"--keep {root}: the folder is not empty; name a new one")
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(root)], check=True)
    (root / ".venv").symlink_to(REPO / ".venv")
    return root


def run_lab(handout: Path, work: Path) -> dict:
    """Each command in turn, timed; stops at the first failure but for
    `tortoise run`'s exit 3 (some runs failed and are stored as failed),
    which is no failure of the commands: the handout's grade decides, as it
    does for a student."""
    rows, ok, graded = [], True, None
    t_lab = time.monotonic()
    for cmd in what_to_run(handout):
        t0 = time.monotonic()
        p = subprocess.run(shlex.split(cmd), cwd=work, capture_output=True, text=True)
        wall = time.monotonic() - t0
        rows.append((cmd, wall, p.returncode))
        if " grade " in f" {cmd} ":
            graded = p.returncode == 0 and re.search(r"\bcomplete\b", p.stdout) is not None
            if not graded:
                print(p.stdout[-3000:], p.stderr[-2000:], sep="\n", file=sys.stderr)
        if p.returncode != 0:
            # exit 3 of `tortoise run`: some runs failed and are stored as failed; a student goes on,
            # and the grade decides (its failed-runs share)
            partial = p.returncode == 3 and " run " in f" {cmd} "
            ok = ok and partial
            print(f"{'some runs failed' if partial else 'FAILED'} ({p.returncode}): {cmd}\n"
                  f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}", file=sys.stderr)
            if not partial:
                break
    return {"rows": rows, "ok": ok, "graded": graded, "minutes": (time.monotonic() - t_lab) / 60}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labs", default="", help="comma-separated handout numbers (default: every lab)")
    ap.add_argument("--keep", type=Path, help="run in this (new) folder and keep it")
    a = ap.parse_args(argv)
    wanted = {x.strip().zfill(2) for x in a.labs.split(",") if x.strip()}
    handouts = sorted(p for p in (REPO / "labs").glob("[0-9][0-9]-*.md") if not wanted or p.name[:2] in wanted)
    if not handouts:
        raise SystemExit(f"--labs {a.labs}: no such handout in labs/ (they are numbered 01, 02, ...)")
    work = scratch_clone(a.keep)
    summary, bad = [], False
    try:
        for h in handouts:
            promise = load_lab(h, repo=REPO).spec.expected_minutes
            print(f"== {h.name} (promised: {promise} min) ==", flush=True)
            r = run_lab(h, work)
            for cmd, wall, rc in r["rows"]:
                print(f"  {wall:8.1f} s  rc {rc}  {cmd}", flush=True)
            ratio = r["minutes"] / promise if promise else float("nan")
            summary.append((h.name, promise, r["minutes"], ratio, r["graded"], r["ok"]))
            bad |= not r["ok"] or r["graded"] is not True
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| lab | promised (min) | measured (min) | measured / promised | grade | commands |")
    print("|---|---:|---:|---:|---|---|")
    for name, promise, minutes, ratio, graded, ok in summary:
        grade = {True: "complete", False: "NOT complete", None: "no grade command"}[graded]
        print(f"| {name} | {promise} | {minutes:.1f} | {ratio:.2f} | {grade} | {'ok' if ok else 'FAILED'} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
