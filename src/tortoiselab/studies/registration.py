"""Claims registered with the runs they judged: each claim's reading
(metric, set-up, comparison, test, effect, rule) hashed, and, in the
results folder's `registry.json`, the hash each claim had when the report
first judged a given set of runs. A claim whose hash changed while its runs
stayed the same was changed after its data had been judged, and the report
says so (docs/statistics.md, "Registration"). The file is written by
the store (host/store/files.py: whole, no link followed: a results folder
is untrusted input) and read as untrusted: a malformed one is set aside, never trusted."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from tortoiselab.host import safefs
from tortoiselab.host.store import files
from tortoiselab.studies import power as pw
from tortoiselab.studies.data import current_run_ids
from tortoiselab.studies.model import Claim, Study, Verdict
from tortoiselab.studies.registry import STUDIES, all_experiment_files

REGISTRY = "registry.json"
FORMAT = 1


def claim_reading(c: Claim) -> dict:
    """What a claim registers: every field that decides its verdict, in
    words (the measure and judge functions by their qualified names)."""
    effect = pw.effect_of(c.judge)
    return {"id": c.id, "sentence": c.sentence, "primary": c.primary, "variant": c.variant, "text": c.text,
            "experiment": c.experiment, "metric": c.metric, "rule": c.rule, "setup": c.setup, "grid": c.grid,
            "loader": c.loader, "untestable": c.untestable, "effect": effect.text() if effect else "",
            "measure": getattr(c.measure, "__qualname__", ""), "judge": getattr(c.judge, "__qualname__", "")}


def claim_hash(c: Claim) -> str:
    """sha256 (first 16 hex digits) of the claim's reading."""
    return hashlib.sha256(json.dumps(claim_reading(c), sort_keys=True).encode()).hexdigest()[:16]


def table_hash(studies: dict[str, Study]) -> str:
    """"sha256 <16 hex>" of every claim's hash, in order."""
    h = hashlib.sha256("\n".join(claim_hash(c) for s in studies.values() for c in s.claims).encode())
    return f"sha256 {h.hexdigest()[:16]}"


def runs_digest(v: Verdict, grid: str | None) -> str:
    """The runs a verdict judged, as a digest of its experiment, the grid
    it read and that grid's run ids."""
    f = all_experiment_files().get(v.experiment)
    g = v.grid or grid
    ids = sorted(current_run_ids(f, g)) if f else []
    return hashlib.sha256(json.dumps([v.experiment, g, ids]).encode()).hexdigest()[:16]


def _load(path: Path, root: Path) -> dict:
    """The registry file, or an empty one where there is none or it is not
    the format this code writes (a damaged file is not trusted)."""
    try:
        data = json.loads(safefs.read_text(path, root, "reading the claims registry"))
    except FileNotFoundError:
        return {"format": FORMAT, "claims": {}}
    except (ValueError, UnicodeDecodeError):
        return {"format": FORMAT, "claims": {}, "note": "a malformed registry.json was set aside"}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("claims"), dict):
        return {"format": FORMAT, "claims": {}, "note": "a registry.json of another format was set aside"}
    return data


def record_judged(results: Path, grid: str | None, verdicts: dict[str, list[Verdict]]) -> dict[str, list[Verdict]]:
    """Each verdict checked against the registry in results/registry.json:
    marked `changed` where the same runs were judged before under another
    hash of its claim; then every (hash, runs) not yet there recorded with
    the time. A results folder that does not exist is left alone."""
    results = Path(results)
    if not results.is_dir():
        return verdicts
    path = results / REGISTRY
    data = _load(path, results)
    claims = {c.id: c for s in STUDIES.values() for c in s.claims}
    now = f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    out: dict[str, list[Verdict]] = {}
    for sid, vs in verdicts.items():
        out[sid] = []
        for v in vs:
            if v.verdict == "no data" or v.claim_id not in claims:
                out[sid].append(v)
                continue
            h, runs = claim_hash(claims[v.claim_id]), runs_digest(v, grid)
            seen = data["claims"].setdefault(v.claim_id, [])
            before = [e for e in seen if isinstance(e, dict) and e.get("runs") == runs and e.get("hash") != h]
            if not any(isinstance(e, dict) and e.get("runs") == runs and e.get("hash") == h for e in seen):
                seen.append({"hash": h, "runs": runs, "judged": now})
            changed = (f"these runs were judged on {before[0].get('judged')} under claim hash {before[0].get('hash')}; "
                       f"the claim is now {h}") if before else ""
            out[sid].append(dataclasses.replace(v, changed=changed) if changed else v)
    # whole, never through a link (host/store/files.py)
    files.write_results_file(results, REGISTRY, json.dumps(data, indent=1, sort_keys=True) + "\n",
                             "recording judged claims")
    return out
