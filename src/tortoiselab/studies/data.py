"""The studies' runs: which folder holds an experiment's results on a grid,
which run ids the experiment file's grid has now, and the runs table with
the studies' own columns beside the results store's (tortoiselab.host.store
owns the folders; docs/running.md, "What a run stores")."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd
import yaml

from tortoiselab.analysis.gates import physics_gate
from tortoiselab.host import audit, store
from tortoiselab.host.store import RunRecord
from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec import cols
from tortoiselab.studies.connections import second_origin_connections
from tortoiselab.spec.experiment import ClientCfg, expand, load


def _repo_file(f: str | Path) -> Path:
    """A repo-relative experiment file (as the studies name them), or a path
    that exists from here, or an absolute one."""
    p = Path(f)
    return p if p.is_absolute() or p.exists() else REPO / p


def experiment_name(experiment: str | Path) -> str:
    """experiments/cubic_plus.yaml or cubic_plus -> cubic_plus."""
    p = Path(experiment)
    if p.suffix in (".yaml", ".yml"):
        raw = yaml.safe_load(_repo_file(p).read_text(encoding="utf-8"))
        return str(raw["name"])  # the name alone: the file is validated where it is run
    return str(experiment)


def study_folder(experiment: str | Path, grid: str | None = None, results: str | Path = "results") -> Path:
    """results/<name> for the file's own sweep, results/<name>@<grid> for a
    grid (where `tortoise run FILE --grid NAME` writes)."""
    name = experiment_name(experiment)
    return Path(results) / (f"{name}@{grid}" if grid else name)


def report_grids(experiment_file: str | Path, grid: str | None, claim: str | None = None) -> list[str | None]:
    """The grids a report reads of an experiment: [grid], or for a list
    such as "powered,reduced" the ones of the list the file defines, in
    the list's order (none defined: the last one): a report on the powered
    grids where a study has one, on its reduced grid for the rest. A grid
    whose `claims:` names the claims it was powered for (a part of the
    sweep repeated for them) serves only those: with claim (an id such as
    "cubic_plus.initcwnd-little-role"), the grids that serve it; with
    claim "" (the whole study, e.g. a notebook), only grids without such a
    list; with None, every one (which folders a report lists)."""
    if not grid or "," not in grid:
        return [grid]
    names = [g.strip() for g in grid.split(",") if g.strip()]
    defined = grid_claims(experiment_file)
    keep = [g for g in names if g in defined
            and (claim is None or defined[g] is None or claim in defined[g])]
    return keep or [names[-1]]


def defined_grids(experiment_file: str | Path) -> frozenset[str]:
    """The names under the experiment file's `grids:`."""
    return frozenset(grid_claims(experiment_file))


def grid_claims(experiment_file: str | Path) -> dict[str, tuple[str, ...] | None]:
    """Each grid of the file -> the claims its `claims:` names (None: it
    serves every claim)."""
    f = _repo_file(experiment_file)
    return dict(_grids_defined(str(f.resolve()), f.stat().st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _grids_defined(path: str, mtime_ns: int) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    grids = (doc.get("grids") or {}) if isinstance(doc, dict) else {}
    return tuple((name, tuple(g["claims"]) if isinstance(g, dict) and g.get("claims") else None)
                 for name, g in grids.items())


def current_run_ids(experiment_file: str | Path, grid: str | None) -> set[str]:
    """The run ids the experiment file's grid has now (a folder may also hold
    runs of an earlier version of the file, which must not be counted)."""
    return set(current_points(experiment_file, grid))


def current_points(experiment_file: str | Path, grid: str | None) -> dict[str, str]:
    """run id -> its sweep point (as the cond column writes it) in the
    experiment file's grid now. A run stored by an earlier version of the
    file keeps its id where its configuration is the same, but recorded the
    sweep point of that version (other axes, e.g. linked ones): pairing
    reads the point from here, not from the record."""
    f = _repo_file(experiment_file)
    return dict(_points_of(str(f.resolve()), f.stat().st_mtime_ns, grid))


@functools.lru_cache(maxsize=64)
def _points_of(path: str, mtime_ns: int, grid: str | None) -> tuple[tuple[str, str], ...]:
    """Cached by file and modification time: loading a file validates every
    grid of it (seconds for the large sweeps)."""
    return tuple((r.run_id, json.dumps(r.point or {}, sort_keys=True)) for r in expand(load(Path(path), grid=grid)))


# --- the studies' columns ------------------------------------------------------------


def _num(v) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{f:g}"


def _arm(cc: str, params: dict) -> str:
    """cc with its module parameters, e.g. "cubic_plus(n=6,rtt_aware=1)"."""
    ps = (params or {}).get(cc) or {}
    if not ps:
        return cc
    return f"{cc}({','.join(f'{k}={_num(v)}' for k, v in sorted(ps.items()))})"


def _client_conns(r: RunRecord) -> list[dict]:
    """The loader's connections (spec/measured.ClientConnection) as dicts
    (studies/connections.py counts them)."""
    return [c.model_dump() for c in r.summary.connections] if r.summary is not None else []


def _connect_ms(r: RunRecord) -> float | None:
    """TCP + TLS of the page's first connection."""
    c0 = r.summary.connections[0] if r.summary is not None and r.summary.connections else None
    return c0.connect_ms + (c0.tls_ms or 0) if c0 is not None and c0.connect_ms else None


def _conn_reuse(r: RunRecord) -> float | None:
    """Reuse counted in connections: among the origins other than the
    page's (the first connection's), the share that opened no connection of
    their own, every request of theirs riding one opened for another origin
    (from the loader's connections; None without a second origin)."""
    conns = r.summary.connections if r.summary is not None else []
    if not conns:
        return None
    served = {o for c in conns for o in (c.origins or [c.origin])}
    others = served - {conns[0].origin}
    own = {c.origin for c in conns}
    return len(others - own) / len(others) if others else None


def _repeat(r: RunRecord, key: str):
    return getattr(r.summary.repeat, key) if r.summary is not None and r.summary.repeat is not None else None


def _server(r: RunRecord) -> dict:
    return r.config.get("server") or {}


# the studies' columns beside the runs table's (store.load_runs extra)
STUDY_COLUMNS = {
    "arm": lambda r: _arm(_server(r).get("cc", ""), _server(r).get("module_params", {})),
    "module_params": lambda r: json.dumps(_server(r).get("module_params", {}), sort_keys=True),
    "beta": lambda r: ((_server(r).get("module_params") or {}).get("reno_beta") or {}).get("beta"),
    "url": lambda r: (r.config.get("client") or {}).get("url"),
    "slow_start_after_idle": lambda r: _server(r).get("slow_start_after_idle"),
    "cond": lambda r: json.dumps(r.point or {}, sort_keys=True),
    "connect_ms": _connect_ms,
    "dns_ms": lambda r: r.summary.dns_ms if r.summary is not None else None,
    "plt2_ms": lambda r: _repeat(r, cols.PLT),
    "ttfb2_ms": lambda r: _repeat(r, "ttfb_ms"),
    "content_download2_ms": lambda r: _repeat(r, cols.CDT),
    "repeat_new_conns": lambda r: _repeat(r, "connections_opened"),
    "conn_reuse_ratio": _conn_reuse,
    "conns_reused": lambda r: second_origin_connections(_client_conns(r))[0],
    "conns_new": lambda r: second_origin_connections(_client_conns(r))[1],
    "tcp_conns": lambda r: len(r.connections),
}

DEFAULT_LOADER = ClientCfg.model_fields["loader"].default


def of_loader(df: pd.DataFrame, loader: str | None) -> pd.DataFrame:
    """The runs of one client.loader (None: all of them); a run stored
    without one (older folders) ran the default loader."""
    if loader is None:
        return df
    return df[df[cols.LOADER].fillna(DEFAULT_LOADER) == loader]


def current_runs(exp_dir: str | Path, experiment_file: str | Path | None = None) -> pd.DataFrame:
    """load_runs of a study folder, only the runs its experiment file's grid
    has now, paired by their points now (a folder may also hold runs of an
    earlier version of the file). The file defaults to
    experiments/<name>.yaml and the grid to the folder's "@<grid>" (what
    `tortoise run FILE --grid NAME` writes); the notebooks read runs so, as
    the verdicts do."""
    exp_dir = Path(exp_dir)
    name, _, grid = exp_dir.name.partition("@")
    f = Path(experiment_file) if experiment_file else REPO / "experiments" / f"{name}.yaml"
    points = current_points(f, grid or None)
    return load_runs(exp_dir, set(points), points)


def load_runs(exp_dir: str | Path, run_ids: set[str] | None = None,
              points: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per completed run (store.load_runs): the runs table's
    columns plus STUDY_COLUMNS: arm (cc with its module parameters),
    module_params, beta, url, slow_start_after_idle, cond (the run's sweep
    point as JSON, for pairing), connect_ms (TCP + TLS of the first
    connection), dns_ms, the second load's plt2_ms / ttfb2_ms /
    content_download2_ms / repeat_new_conns, conn_reuse_ratio (reuse
    counted in origins' connections, _conn_reuse), conns_reused / conns_new
    (the load's connections to other origins, reused or opened:
    connections.second_origin_connections), tcp_conns (TCP connections
    in the server capture) and physics (why the run fails the physics
    gate, analysis/gates.py, "" when it passes: such a run has ok False),
    then run_dir. run_ids: only these
    runs (those of the experiment file's current grid); points: run id ->
    sweep point (current_points) to pair by, over what a record says."""
    manifest, pki = audit.folder_site(Path(exp_dir))
    gate = {"physics": lambda r: "; ".join(physics_gate(r.model_dump(mode="json"), manifest, pki))}
    df = store.load_runs(Path(exp_dir), run_ids, extra={**STUDY_COLUMNS, **gate})
    # a run whose numbers no run can measure is not ok for a verdict (analysis/gates.py); `physics` says why
    df[cols.OK] = df[cols.OK].astype(bool) & (df["physics"] == "")
    if points:
        df["cond"] = [points.get(rid, c) for rid, c in zip(df[cols.RUN_ID], df["cond"])]
    for col in ("connect_ms", "dns_ms", "plt2_ms", "ttfb2_ms", "content_download2_ms", "beta", "conn_reuse_ratio",
                "tcp_conns", "conns_reused", "conns_new"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df

