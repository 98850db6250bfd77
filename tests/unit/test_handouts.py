"""The lab handouts (labs/NN-*.md) quote their grids as the grids are.

Two checks per handout, both against expand() of the experiment files (no
lab runs):

1. front matter: an experiment that declares `runs:` or `repetitions:` has
   exactly that many runs / repetitions in its grid (course/handout.py's
   load_lab raises otherwise, so `tortoise grade` refuses a stale handout too);
2. text: every count of runs or repetitions the handout's body states --
   "45 runs", "14 runs", "one repetition", "3 repetitions" -- is a count that
   one of the grids of its experiment files has (the lab's grid, the ci grid,
   the full sweep, ... : "the full grid, 384 runs" is fine), or the sum of the
   lab's grids' runs. Any other count is reported with its line. A number of
   repetitions that is not a grid's (a paper's, a suggestion) must be written
   another way, e.g. "n = 20".

Not checked: the time estimates, and the numbers in tables (only phrases of
the form "<number> run(s)" and "<number> repetition(s)")."""

import re
from pathlib import Path

import pytest

from tortoiselab.course import handout
from tortoiselab.spec.experiment import _points, expand, load

REPO = Path(__file__).resolve().parents[2]
LABS = sorted(p for p in (REPO / "labs").glob("[0-9][0-9]-*.md"))
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12}
COUNT = r"(\d[\d,]*|" + "|".join(WORDS) + r")"
RUNS = re.compile(COUNT + r"\s+runs?\b", re.I)
REPS = re.compile(COUNT + r"\s+repetitions?\b", re.I)


def _number(s: str) -> int:
    return WORDS.get(s.lower()) or int(s.replace(",", ""))


def _grid_counts(lab: handout.Lab) -> tuple[set[int], set[int]]:
    """Run and repetition counts of every grid (and the full sweep) of the
    lab's experiment files, with the sum of the lab's own grids' runs."""
    runs, reps = set(), set()
    # the lab's experiments, and any other the text sends the student to ("Going further")
    named = re.findall(r"experiments/[\w.-]+\.yaml", lab.path.read_text())
    for file in dict.fromkeys([le.file for le in lab.experiments] + named):
        f = lab.repo / file
        full = load(f)
        for grid in (None, *sorted(full.grids or {})):
            e = load(f, grid=grid)
            # points x repetitions: expand()'s count without building every run
            # (the full sweeps have up to ~20,000); the lab's grid is expanded below
            users = (e.population or {}).get("users", 1)  # a population runs each point once per user
            runs.add(len(_points(e)) * e.repetitions * users)
            reps.add(e.repetitions)
    lab_runs = [len(expand(le.exp)) for le in lab.experiments]
    return runs | set(lab_runs) | {sum(lab_runs)}, reps


def _body(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    end = text.index("\n---", 3) + 4  # after the front matter
    head = text[:end].count("\n")
    return [(head + i + 1, line) for i, line in enumerate(text[end:].splitlines())]


@pytest.mark.parametrize("path", LABS, ids=[p.name for p in LABS])
def test_front_matter_counts_are_the_grids(path):
    lab = handout.load_lab(path, REPO)  # raises GradeError on a stale runs: / repetitions:
    for le in lab.experiments:
        assert len(expand(le.exp)) >= 1, le.file


@pytest.mark.parametrize("path", LABS, ids=[p.name for p in LABS])
def test_counts_in_the_text_are_the_grids(path):
    lab = handout.load_lab(path, REPO)
    runs, reps = _grid_counts(lab)
    bad = []
    for n, line in _body(path):
        if line.lstrip().startswith("|"):
            continue  # tables: not phrases of counts
        bad += [f"line {n}: {m.group(0)!r} (the grids have {sorted(runs)} runs)"
                for m in RUNS.finditer(line) if _number(m.group(1)) not in runs]
        bad += [f"line {n}: {m.group(0)!r} (the grids have {sorted(reps)} repetitions)"
                for m in REPS.finditer(line) if _number(m.group(1)) not in reps]
    assert not bad, f"{path.name}: counts that no grid has:\n" + "\n".join(bad)


def test_labs_3_and_4_declare_their_counts():
    """The handouts of this study set state runs and repetitions in their
    front matter, so `tortoise grade` checks them too."""
    for name in ("03-cubic-plus.md", "04-initcwnd.md"):
        lab = handout.load_lab(REPO / "labs" / name, REPO)
        for req in lab.spec.experiments:
            assert req.runs and req.repetitions, (name, req.file)


def test_a_stale_count_is_refused(tmp_path):
    """A handout that quotes another run count than its grid's is refused,
    naming the field and the grid's count."""
    (tmp_path / "labs").mkdir()
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "x.yaml").write_text(
        "name: x\nrepetitions: 2\nsweep:\n  server.cc: [cubic, reno]\n"
        "grids:\n  reduced:\n    repetitions: 3\n")
    lab = tmp_path / "labs" / "09-x.md"
    front = ("---\ntitle: x\nmin_repetitions: 1\nexperiments:\n  - file: experiments/x.yaml\n"
             "    runs: {runs}\n    repetitions: {reps}\n---\n\nThe grid is {runs} runs.\n")
    lab.write_text(front.format(runs=6, reps=3))
    handout.load_lab(lab, tmp_path)
    lab.write_text(front.format(runs=4, reps=3))
    with pytest.raises(handout.GradeError, match=r"runs: 4, but grid 'reduced' of experiments/x.yaml has 6 runs"):
        handout.load_lab(lab, tmp_path)
    lab.write_text(front.format(runs=6, reps=2))
    with pytest.raises(handout.GradeError, match=r"repetitions: 2, but grid 'reduced' .* has 3"):
        handout.load_lab(lab, tmp_path)
