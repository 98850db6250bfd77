"""What a grader checks of a results folder beyond its records: the physics
gate with the folder's own site, and the reruns of stored runs on the
virtual clock (docs/course-labs.md, "Graded by rerunning").

- `folder_site(exp_dir)`: the site manifest and PKI description the runner
  made for the folder (<exp>/.lab/site/manifest.json, .lab/pki/pki.json;
  host/labcheck.py compares them with what their generators make);
- `gate_runs(exp_dir, records)`: run id -> why its numbers cannot be
  (analysis/gates.physics_gate), for the runs that fail the gate;
- `audit(exp_dir, exp, run_ids, k, seed)`: rerun every one of the run ids
  (k None) or k of them chosen by seed, the chosen runs of a batch in one
  boot of it (docs/determinism.md, "Batches": a run repeats to the
  microsecond in the boot it ran in), into a scratch folder inside the
  results folder (determinism.scratch_folder, removed afterwards) and
  compare every number a grade, a report or a verdict reads of it (AUDITED)
  and its server capture (determinism.Comparison). On the virtual clock a
  run repeats exactly with the same code and lab kernel, so any difference
  is a number that was not measured so. A run of the real clock cannot be
  rerun exactly: it is named as one the audit cannot verify;
- `detection_probability(n, k, f)`: the chance that k runs sampled from n
  (without replacement) include at least one of f forged ones.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tortoiselab.analysis.gates import physics_gate
from tortoiselab.host import backends, determinism, readfiles, store
from tortoiselab.spec import cols
from tortoiselab.spec.experiment import Experiment, expand

# the numbers of a record the audit compares (dotted paths into run.json)
AUDITED = (cols.OK, "summary.plt_ms", "summary.bytes", "summary.ttfb_ms", "summary.dns_ms",
           "summary.plt_from_request_ms", "summary.content_download_ms", "summary.connections_opened",
           "summary.repeat.plt_ms", "summary.repeat.ttfb_ms", "summary.data_bytes", "summary.throughput_mbit",
           "summary.steady_throughput_mbit", "fidelity.0.measured")


def _read_json(exp_dir: Path, which: str) -> dict | None:
    try:  # a link or a FIFO is refused (LinkRefused, NotRegular: the message names it and the fix)
        return readfiles.lab_json(exp_dir, which)
    except (OSError, ValueError):
        return None


def _record(run_dir: Path) -> dict:
    """A run's record by the store (no link followed, no FIFO opened); {} when damaged."""
    try:
        return store.read_record(run_dir).model_dump(mode="json")
    except store.StoreError:
        return {}


def folder_site(exp_dir: Path) -> tuple[dict | None, dict | None]:
    """(site manifest, PKI description) of a results folder; None for one
    that is missing or unreadable; one that is a link or no regular file is
    refused (host/safefs.py), so that no planted file turns the gate off
    unnamed."""
    return _read_json(Path(exp_dir), "site"), _read_json(Path(exp_dir), "pki")


def gate_runs(exp_dir: Path, records: list[dict]) -> dict[str, list[str]]:
    """run id -> the physics gate's reasons, for every record that fails it."""
    manifest, pki = folder_site(exp_dir)
    out = {}
    for rec in records:
        why = physics_gate(rec, manifest, pki)
        if why:
            out[str(rec.get(cols.RUN_ID))] = why
    return out


def value_at(rec: dict, dotted: str) -> Any:
    """rec's value at a dotted path ("summary.repeat.plt_ms", "fidelity.0.measured"); None if absent."""
    v: Any = rec
    for part in dotted.split("."):
        if isinstance(v, dict):
            v = v.get(part)
        elif isinstance(v, list) and part.isdigit() and int(part) < len(v):
            v = v[int(part)]
        else:
            return None
    return v


def number_diffs(stored: dict, rerun: dict) -> list[str]:
    """"name: stored X, rerun Y" for every AUDITED number that differs."""
    out = []
    for k in AUDITED:
        a, b = value_at(stored, k), value_at(rerun, k)
        if a != b:
            out.append(f"{k.removeprefix('summary.')}: stored {a}, rerun {b}")
    return out


def detection_probability(n: int, k: int, f: int = 1) -> float:
    """P(k runs drawn without replacement from n include at least one of f
    forged ones) = 1 - C(n-f, k) / C(n, k); k/n for one. Pure."""
    if not 0 <= f <= n or k < 0:
        raise ValueError(f"need 0 <= f <= n and k >= 0, got n={n}, k={k}, f={f}")
    k = min(k, n)
    return 1.0 - math.comb(n - f, k) / math.comb(n, k) if n else 0.0


@dataclass
class AuditResult:
    k: int | None  # None: every run
    seed: int
    chosen: list[str] = field(default_factory=list)
    pool: int = 0  # the runs the sample was drawn from
    labels: dict[str, str] = field(default_factory=dict)
    mismatches: dict[str, list[str]] = field(default_factory=dict)  # run id -> what differed
    real_clock: list[str] = field(default_factory=list)  # chosen runs that cannot be rerun exactly
    refused: str | None = None  # why the reruns could not run (then it fails)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.mismatches and not self.real_clock

    @property
    def rerun(self) -> list[str]:
        return [r for r in self.chosen if r not in self.real_clock]


def _refusal(exp_dir: Path) -> str | None:
    if not (Path(exp_dir) / ".lab" / "READY").exists():
        return f"{exp_dir} has no .lab/READY (the site and PKI its runs used): they cannot be rerun as they ran"
    return None


def audit(exp_dir: Path, exp: Experiment, run_ids: list[str], k: int | None, seed: int, jobs: int = 1,
          backend: str = "uml") -> AuditResult:
    """Rerun every one of run_ids (k None, or k >= their number) or k of
    them, sampled by seed from their sorted ids (completed ok runs of exp in
    exp_dir), and compare each with its stored record and capture. A run
    the record says ran on the real clock is not rerun: named in
    real_clock. exp: the experiment with the repetitions the folder holds
    (its run ids, and those of the runs' batches, come from expand(exp))."""
    res = AuditResult(k, seed)
    specs = {r.run_id: r for r in expand(exp)}
    pool = sorted(r for r in run_ids if r in specs)  # another seed's runs: the grade's experiment check names them
    res.pool = len(pool)
    res.chosen = pool if k is None or k >= len(pool) else sorted(random.Random(seed).sample(pool, k))
    if not res.chosen:
        return res
    res.refused = _refusal(exp_dir)
    if res.refused:
        return res
    res.real_clock = [r for r in res.chosen if value_at(_record(Path(exp_dir) / r), "meta.clock") != "virtual"]
    res.labels = {r: f"{determinism.point_label(specs[r].point)}, rep {specs[r].repetition}" for r in res.chosen}
    if not res.rerun:
        return res
    try:
        info = backends.choose(backend, "virtual", sorted({specs[r].settings.server.cc for r in res.rerun}))
    except backends.LabError as exc:
        res.refused = f"the lab cannot run here: {exc}"
        return res
    t0 = time.monotonic()
    try:
        with determinism.scratch_folder(exp_dir) as work:
            comps = determinism.rerun_and_compare(Path(exp_dir), res.rerun, specs, info, work, jobs)
            for c in comps:
                rerun = next(work.rglob(f"{c.run_id}/run.json"), None)
                diffs = number_diffs(_record(Path(exp_dir) / c.run_id), _record(rerun.parent) if rerun else {})
                diffs += [d for d in c.differences if not d.startswith((cols.PLT, "bytes"))]
                if diffs and c.a.code and c.b.code and c.a.code != c.b.code:
                    diffs.append(f"note: the lab's code differs from the code the run was made with (digest "
                                 f"{c.a.code[:12]} vs {c.b.code[:12]}); a run repeats only with the same code")
                if diffs:
                    res.mismatches[c.run_id] = diffs
    except (determinism.DeterminismError, backends.LabError, OSError) as exc:
        res.refused = f"the reruns failed: {exc}"
    res.wall_seconds = round(time.monotonic() - t0, 1)
    return res
