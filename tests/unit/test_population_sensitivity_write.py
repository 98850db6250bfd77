"""`tortoise population-sensitivity --write` writes its tables into the
results folder without following a link planted there (a results folder is
untrusted input, docs/faults.md). The tables themselves are stood in for:
this tests the writer only (studies/population_sensitivity.py has its own
tests)."""

import pytest

from tortoiselab import cli
from tortoiselab.studies import population_sensitivity as PS


@pytest.fixture
def tables(monkeypatch):
    monkeypatch.setattr(PS, "report", lambda e, results, grid: f"table of {e} on {grid}")


def test_the_tables_of_every_experiment_go_to_one_file(tmp_path, tables, capsys):
    rc = cli.main(["population-sensitivity", "tortoise-population", "coalescing-population",
                   "--results", str(tmp_path), "--write"])
    assert rc == 0
    text = (tmp_path / cli.SENSITIVITY_FILE).read_text()
    assert text == "table of tortoise-population on sensitivity\ntable of coalescing-population on sensitivity\n"
    assert not list(tmp_path.glob(".*tmp*"))


def test_a_link_in_the_files_place_is_refused_and_its_target_untouched(tmp_path, tables, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    results = tmp_path / "results"
    results.mkdir()
    (results / cli.SENSITIVITY_FILE).symlink_to(victim)
    rc = cli.main(["population-sensitivity", "tortoise-population", "--results", str(results), "--write"])
    assert rc != 0
    assert victim.read_text() == "keep me"
    assert (results / cli.SENSITIVITY_FILE).is_symlink()
    assert "link" in capsys.readouterr().err


def test_without_write_the_tables_are_printed_and_nothing_is_written(tmp_path, tables, capsys):
    assert cli.main(["population-sensitivity", "tortoise-population", "--results", str(tmp_path)]) == 0
    assert "table of tortoise-population" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
