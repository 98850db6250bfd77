"""A course lab's handout (labs/NN-name.md) as data: its front matter
(the YAML block between the first two `---` lines, described in
course/grade.py and labs/README.md), the experiments and sweep points it
requires, and how a point is named. course/grade.py checks a results
folder against it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tortoiselab.spec.experiment import Experiment, ExperimentError, expand, load
from tortoiselab.spec.pathspec import describe_errors


class GradeError(ValueError):
    """A bad LAB or RESULTS argument, or a lab file that is wrong: the message
    names which and says how to fix it."""


class ExperimentReq(BaseModel):
    """One experiment of a lab. runs / repetitions: what the handout tells
    the student the grid has (its run count, its repetitions per point);
    load_lab checks them against the grid, so a handout cannot quote a
    stale grid."""

    model_config = ConfigDict(extra="forbid")
    file: str
    grid: str | None = None
    min_repetitions: int | None = Field(None, ge=1)
    require: dict[str, list[Any]] = Field(default_factory=dict)
    runs: int | None = Field(None, ge=1)
    repetitions: int | None = Field(None, ge=1)


class LabSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    study: str | None = None
    grid: str = "reduced"
    min_repetitions: int = Field(3, ge=1)
    fidelity_ok_share: float = Field(0.9, ge=0, le=1)
    max_failed_share: float = Field(0.1, ge=0, le=1)
    expected_minutes: float | None = Field(None, gt=0)
    notebook: str | None = None
    experiments: list[ExperimentReq] = Field(min_length=1)


@dataclass
class Point:
    """One sweep point of the lab's grid: its label and resolved config."""

    label: str
    values: dict[str, Any]
    config: dict


@dataclass
class LabExperiment:
    """One experiment of a lab, resolved: the grid's experiment and points."""

    file: str
    grid: str
    exp: Experiment
    points: dict[str, Point]  # config key -> point
    required: list[str]  # config keys of the required points
    min_repetitions: int


@dataclass
class Lab:
    path: Path
    repo: Path
    spec: LabSpec
    experiments: list[LabExperiment]


def find_lab(arg: str, labs_dir: Path = Path("labs")) -> Path:
    """LAB as given: a handout (labs/01-tortoise.md), the same without .md, or
    a unique prefix of one (labs/01, 01)."""
    p = Path(arg)
    if p.is_file():
        return p
    if p.with_suffix(".md").is_file():
        return p.with_suffix(".md")
    folder = p.parent if p.parent != Path(".") else labs_dir
    hits = sorted(folder.glob(f"{p.name}*.md")) if folder.is_dir() else []
    hits = [h for h in hits if h.name != "README.md"]
    if len(hits) == 1:
        return hits[0]
    have = sorted(h.name for h in labs_dir.glob("*.md") if h.name != "README.md") if labs_dir.is_dir() else []
    why = f"matches {', '.join(h.name for h in hits)}" if hits else "no such lab handout"
    raise GradeError(f"LAB {arg!r}: {why}; give one of {', '.join(have) or '(no labs/ here: run from the repository)'}"
                     ", e.g. tortoise grade labs/01-tortoise.md")


def front_matter(text: str, where: str) -> dict:
    """The YAML between the handout's first two `---` lines."""
    m = re.match(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", text, re.S)
    if not m:
        raise GradeError(f"LAB {where}: no front matter; the handout must start with a --- YAML block "
                         "(title, experiments, min_repetitions, ...) closed by ---")
    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        raise GradeError(f"LAB {where}: front matter is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise GradeError(f"LAB {where}: front matter must be a mapping (title, experiments, ...)")
    return data


def load_lab(path: Path, repo: Path | None = None) -> Lab:
    """Read and check a lab handout's requirements against its experiments:
    every file loads with the grid, every required axis and value is in the
    grid's sweep, and the grid has the repetitions the lab asks for."""
    path = Path(path)
    repo = repo or path.resolve().parent.parent
    try:
        spec = LabSpec(**front_matter(path.read_text(encoding="utf-8"), str(path)))
    except ValidationError as exc:
        raise GradeError(f"LAB {path}: front matter: {describe_errors(exc)}") from None
    return Lab(path, repo, spec, [_lab_experiment(path, repo, spec, i, req) for i, req in enumerate(spec.experiments)])


def _lab_experiment(path: Path, repo: Path, spec: LabSpec, i: int, req: ExperimentReq) -> LabExperiment:
    where = f"LAB {path}: experiments[{i}]"
    grid = req.grid or spec.grid
    f = repo / req.file
    if not f.is_file():
        raise GradeError(f"{where}.file: {req.file} does not exist under {repo}; name an experiment file "
                         "relative to the repository, e.g. experiments/tortoise.yaml")
    try:
        exp = load(f, grid=grid)
    except ExperimentError as exc:
        raise GradeError(f"{where}: {req.file} with grid {grid!r}: {exc}") from None
    points: dict[str, Point] = {}
    for run in expand(exp):
        points.setdefault(config_key(run.config), Point(point_label(run.point), run.point, plain(run.config)))
    for axis, values in req.require.items():
        if axis not in exp.sweep:
            raise GradeError(f"{where}.require.{axis}: not a sweep axis of {exp.name} "
                             f"(axes: {', '.join(exp.sweep) or 'none'})")
        missing = [v for v in values if v not in exp.sweep[axis]]
        if missing:
            raise GradeError(f"{where}.require.{axis}: {missing} not in the grid's values {exp.sweep[axis]}")
    required = [k for k, p in points.items()
                if all(p.values.get(a) in vs for a, vs in req.require.items())]
    n_runs = len(expand(exp))
    if req.runs is not None and req.runs != n_runs:
        raise GradeError(f"{where}.runs: {req.runs}, but grid {grid!r} of {req.file} has {n_runs} runs; "
                         "write the grid's count in the front matter and the text")
    if req.repetitions is not None and req.repetitions != exp.repetitions:
        raise GradeError(f"{where}.repetitions: {req.repetitions}, but grid {grid!r} of {req.file} has "
                         f"{exp.repetitions}; write the grid's repetitions in the front matter and the text")
    reps = req.min_repetitions or spec.min_repetitions
    if reps > exp.repetitions:
        raise GradeError(f"{where}.min_repetitions: {reps}, but grid {grid!r} of {req.file} has only "
                         f"{exp.repetitions} repetitions; lower it or raise the grid's repetitions")
    return LabExperiment(req.file, grid, exp, points, required, reps)


# --- runs and configurations ---------------------------------------------------------


def plain(obj: Any) -> Any:
    """As run.json stores it (JSON round trip), so configs compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def config_key(config: dict) -> str:
    return json.dumps(plain(config), sort_keys=True, separators=(",", ":"))


def point_label(point: dict) -> str:
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in point.items()) or "(the single point)"


def fmt_value(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)
