"""Weak input cases of issue 50: a yes/no where a number goes (`rtt_ms:
true` ran a 1 ms path; spec/strictnum.py) and names that end in a newline
(`re.match` with `$` passed a grid "ci\\n", whose folder became
`t4g@ci\\n`). Each refusal names the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field

from tortoiselab import cli
from tortoiselab.host import readfiles, slurm, verify, versions
from tortoiselab.host.errors import RunnerError
from tortoiselab.spec.experiment import ExperimentError, Grid, load
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.regions import Regions

REPO = Path(__file__).resolve().parents[2]
QUICK = (REPO / "experiments" / "quick.yaml").read_text()


def _refused(tmp_path: Path, text: str) -> str:
    f = tmp_path / "e.yaml"
    f.write_text(text)
    with pytest.raises(ExperimentError) as e:
        load(f)
    return str(e.value)


# --- a yes/no is no number -------------------------------------------------------------


def test_rtt_true_is_refused_naming_the_field_and_the_fix(tmp_path, capsys):
    """Seen: `rtt_ms: true` validated, and ran as 1 ms."""
    f = tmp_path / "e.yaml"
    f.write_text(QUICK.replace("rtt_ms: 200", "rtt_ms: true"))
    assert cli.main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "path.rtt_ms: Value error, true is a yes/no, not a number" in err
    assert "give a number, e.g. rtt_ms: 1" in err and "Traceback" not in err


@pytest.mark.parametrize("change, field", [
    (("loss_pct: 1", "loss_pct: false"), "loss_pct"),  # false would have been 0: a loss-free path
    (("rate_mbit: 10", "rate_mbit: yes"), "rate_mbit"),
    (("initcwnd_pkts: 10", "initcwnd_pkts: on"), "initcwnd_pkts"),
    (("repetitions: 3", "repetitions: true"), "repetitions"),
    (("seed: 1", "seed: true"), "seed"),
])
def test_every_number_of_an_experiment_refuses_yes_no(tmp_path, change, field):
    msg = _refused(tmp_path, QUICK.replace(*change))
    assert f"{field}: " in msg and "is a yes/no, not a number" in msg and f"e.g. {field}: 1" in msg


def test_a_yes_no_in_a_sweep_a_grid_or_a_mapping_of_numbers_is_refused(tmp_path):
    msg = _refused(tmp_path, QUICK + "  path.loss_pct: [0, true]\n")
    assert "path.loss_pct: Value error, true is a yes/no" in msg and "[from sweep." in msg
    grid = QUICK + "grids:\n  g: {repetitions: 1, path: {rtt_ms: true}}\n"
    assert "path.rtt_ms: Value error, true is a yes/no" in _refused(tmp_path, grid)
    params = QUICK.replace("server: {cc: cubic,", "server: {module_params: {cubic_plus: {n: true}}, cc: cubic,")
    assert 'server.module_params: Value error, {"cubic_plus": {"n": true}} is a yes/no' in _refused(tmp_path, params)
    host = QUICK.replace("server: {cc: cubic,", "server: {tcp_rmem: [4096, true, 6291456], cc: cubic,")
    assert "server.tcp_rmem: Value error, [4096, true, 6291456] is a yes/no" in _refused(tmp_path, host)
    with pytest.raises(ValueError, match="repetitions\n  Value error, true is a yes/no"):
        Grid(repetitions=True)
    with pytest.raises(ValueError, match="rtt_ms\n  Value error, true is a yes/no"):
        PathSpec(rtt_ms=True)


def test_yes_no_fields_still_take_yes_no(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(QUICK.replace("coalescing: true", "coalescing: false") + "paired: yes\n")
    exp = load(f)
    assert exp.paired is True and exp.model_dump()["client"]["coalescing"] is False
    assert PathSpec(rtt_ms=1).rtt_ms == 1.0  # a whole number is a number


def test_which_annotations_take_numbers():
    from tortoiselab.spec.strictnum import bool_for_number, takes_numbers  # here: the other tests run on main too

    assert takes_numbers(int) and takes_numbers(float) and takes_numbers(float | None)
    assert takes_numbers(Annotated[int, Field(ge=1)]) and takes_numbers(Literal[1, 2])
    assert not takes_numbers(bool) and not takes_numbers(int | bool) and not takes_numbers(str)
    assert not takes_numbers(Literal["h2", "h1"]) and not takes_numbers(bool | None)
    assert bool_for_number([1, True], list[float]) and bool_for_number({"a": False}, dict[str, float | str])
    assert bool_for_number((1, True, 3), tuple[int, int, int])
    assert not bool_for_number([True], list[bool]) and not bool_for_number(True, int | bool)
    assert not bool_for_number("true", float) and not bool_for_number(1, float)


# --- names end where they end --------------------------------------------------------------


def test_a_grid_name_ending_in_a_newline_is_refused(tmp_path):
    """Seen: grids: {"ci\\n": ...} passed (re.match lets $ match before a
    trailing newline) and made a results folder t4g@ci\\n."""
    msg = _refused(tmp_path, QUICK + 'grids:\n  "ci\\n": {repetitions: 1}\n')
    assert "grid name 'ci\\n': lower-case letters, digits, - and _" in msg
    assert "name" in _refused(tmp_path, QUICK.replace("name: quick", 'name: "quick\\n"'))


def test_a_region_name_ending_in_a_newline_is_refused():
    with pytest.raises(ValueError, match=r"name 'india\\n': use lowercase letters"):
        Regions._names({"india\n": None})  # the profiles' and addons' names (spec/regions.py)
    assert Regions._names({"india": None}) == {"india": None}


def test_run_ids_and_slurm_options_end_where_they_end(tmp_path):
    assert readfiles.RUN_ID.fullmatch("0123456789ab") and not readfiles.RUN_ID.fullmatch("0123456789ab\n")
    (tmp_path / "0123456789ab\n").mkdir()
    assert not readfiles.is_run(tmp_path, "0123456789ab\n")
    assert verify.run_folders(tmp_path) == []  # neither a run nor named like one
    assert not versions.RUN_DIR.fullmatch("0123456789ab\n")
    for kwargs in ({"time_limit": "30\n"}, {"mem": "2G\n"}, {"partition": "debug\n"}):
        with pytest.raises(RunnerError):
            slurm.check_options(**{"partition": None, "parallelism": None, "time_limit": None, "mem": None,
                                   **kwargs})

