"""Bounded YAML (spec/yamlfile.py) and the experiment and region loaders
that use it: hostile or broken files are refused with the file named and a
short message, before anything is built from them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.unit.results_copy import stored_copy
from tortoiselab import cli

from tortoiselab.spec.experiment import ExperimentError, load
from tortoiselab.spec.regionfiles import read_regions_file
from tortoiselab.spec.regions import RegionError
from tortoiselab.spec.yamlfile import MAX_INT_DIGITS, MAX_VALUES, YamlFileError, excerpt, read_yaml


REPO = Path(__file__).resolve().parents[2]


def alias_bomb(levels: int, width: int = 9) -> str:
    """The "billion laughs" document: each level an anchored list of
    `width` aliases of the level below; width**levels values in all."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [7, 8, 12])
def test_an_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path, levels):
    f = tmp_path / "bomb.yaml"
    f.write_text(alias_bomb(levels) + "name: bomb\ndescription: *a%d\n" % levels)
    assert f.stat().st_size < 1024 * (levels // 7 + 1)
    t0 = time.monotonic()
    with pytest.raises(ExperimentError) as exc:
        load(f)
    assert time.monotonic() - t0 < 2
    msg = str(exc.value)
    assert len(msg) < 400, len(msg)
    assert str(f) in msg and "anchors and aliases" in msg and f"at most {MAX_VALUES}" in msg


def test_a_few_aliases_are_fine(tmp_path):
    f = tmp_path / "ok.yaml"
    f.write_text("base: &b {rtt_ms: 50}\nuse: [*b, *b]\n")
    assert read_yaml(f) == {"base": {"rtt_ms": 50}, "use": [{"rtt_ms": 50}, {"rtt_ms": 50}]}


def test_a_recursive_anchor_is_refused(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("a: &a [1, *a]\n")
    with pytest.raises(YamlFileError, match=r"r.yaml: line 1: an anchor refers to itself"):
        read_yaml(f)


def test_non_utf8_names_the_file_and_the_byte(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes("name: caf".encode() + b"\xe9\nrepetitions: 2\n")
    with pytest.raises(ExperimentError, match=r"latin1.yaml: not UTF-8 text: byte 9 \(line 1\) is b'\\xe9'; "
                                              r"save the experiment file as UTF-8"):
        load(f)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("name: big\ndescription: '" + "x" * (2 << 20) + "'\n")
    with pytest.raises(ExperimentError, match=r"big.yaml: \d+ bytes; a experiment file is at most 1048576 bytes"):
        load(f)


def test_deep_nesting_is_refused(tmp_path):
    f = tmp_path / "deep.yaml"
    f.write_text("a: " + "[" * 100 + "]" * 100 + "\n")
    with pytest.raises(YamlFileError, match=r"deep.yaml: line 1: a.0.0.0.*: the file nests more than 64 levels deep"):
        read_yaml(f)


def test_syntax_errors_say_where(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\npath: {rtt_ms: 50\n")
    with pytest.raises(ExperimentError, match=r"bad.yaml: not valid YAML at line 3, column 1"):
        load(f)


def test_duplicate_keys_are_refused_in_experiments_and_regions(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("name: x\nrepetitions: 1\nrepetitions: 2\n")
    with pytest.raises(ExperimentError, match=r"found duplicate key 'repetitions' \(first at line 2\)"):
        load(f)
    r = tmp_path / "regions.yaml"
    r.write_text("version: 1\nversion: 1\nprofiles: {}\n")
    with pytest.raises(RegionError, match="duplicate key 'version'"):
        read_regions_file(r)


def test_a_region_file_bomb_is_refused(tmp_path):
    r = tmp_path / "regions.yaml"
    r.write_text(alias_bomb(8) + "version: 1\nprofiles: {}\n")
    with pytest.raises(RegionError, match="anchors and aliases") as exc:
        read_regions_file(r)
    assert len(str(exc.value)) < 400


def test_a_long_bad_value_is_quoted_as_an_excerpt(tmp_path):
    f = tmp_path / "long.yaml"
    f.write_text("name: x\npath: {rtt_ms: '" + "9" * 5000 + "x', loss_pct: 0, rate_mbit: 10}\n")
    with pytest.raises(ExperimentError) as exc:
        load(f)
    assert len(str(exc.value)) < 600 and "more characters" in str(exc.value)
    assert excerpt("y" * 1000, 10) == "'yyyyyyyyy... (992 more characters)"


# --- issue 50: depth and digits checked on the events, before anything is composed ----------


DEEP = "name: deep\nrepetitions: 1\nextra: " + "[" * 1000 + "]" * 1000 + "\n"  # 2 KB


@pytest.mark.parametrize("levels", [65, 1000, 200_000])
def test_deep_nesting_is_refused_before_the_composer_recurses(tmp_path, levels):
    """Seen: 1,000 nested `[` in a 2 KB file, a RecursionError traceback
    from `validate` (PyYAML's composer recurses once per level)."""
    f = tmp_path / "deep.yaml"
    f.write_text("name: deep\nextra: " + "[" * levels + "]" * levels + "\n")
    t0 = time.monotonic()
    with pytest.raises(ExperimentError) as e:
        load(f)
    assert time.monotonic() - t0 < 1.0
    assert str(e.value) == (f"{f}: line 2: extra.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.... (91 more characters): the file "
                            "nests more than 64 levels deep; write the values out flat (the shipped files nest 9 at "
                            "most)")


def test_validate_names_the_file_and_line_of_deep_nesting(tmp_path, capsys):
    f = tmp_path / "deep.yaml"
    f.write_text(DEEP)
    assert len(DEEP) < 2100
    assert cli.main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tortoise: {f}: line 3: extra.0.0.0") and "nests more than 64 levels deep" in err
    assert "Traceback" not in err and "RecursionError" not in err


def test_64_levels_are_read_65_are_not(tmp_path):
    f = tmp_path / "ok.yaml"
    f.write_text("a: " + "[" * 62 + "1" + "]" * 62 + "\n")  # the mapping, 62 lists and the value
    doc = read_yaml(f)["a"]
    for _ in range(61):
        (doc,) = doc
    assert doc == [1]
    f.write_text("a: " + "[" * 63 + "]" * 63 + "\n")
    assert len(read_yaml(f)["a"]) == 1
    for text in ("a: " + "[" * 64 + "]" * 64 + "\n", "a: " + "[" * 63 + "1" + "]" * 63 + "\n"):
        f.write_text(text)
        with pytest.raises(YamlFileError, match="line 1: a.0.0.*: the file nests more than 64 levels deep"):
            read_yaml(f)


def test_a_number_of_too_many_digits_names_the_file_the_field_and_the_limit(tmp_path, capsys):
    """Seen: `seed:` of 4,400 digits: "Exceeds the limit (4300 digits) for
    integer string conversion", naming neither file nor field."""
    f = tmp_path / "seed.yaml"
    f.write_text((REPO / "experiments" / "quick.yaml").read_text().replace("seed: 1", "seed: " + "7" * 4400))
    assert cli.main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if ln.startswith("seed:"))
    assert err == (f"tortoise: {f}: line {line}: seed: a whole number of 4,400 digits; at most {MAX_INT_DIGITS} are "
                   "accepted (a seed is below 2**63, 19 digits): give a smaller value\n")


@pytest.mark.parametrize("value, field", [
    ("0x" + "f" * 120, "sweep.path.rtt_ms.1"),  # hex has no limit in int(), but printing it has
    ("1_" * 101 + "1", "sweep.path.rtt_ms.1"),
    ("!!int '" + "9" * 101 + "'", "sweep.path.rtt_ms.1"),
])
def test_digits_are_counted_in_every_form_of_a_whole_number(tmp_path, value, field):
    f = tmp_path / "n.yaml"
    f.write_text(f"name: n\nsweep:\n  server.cc: [cubic]\n  path.rtt_ms: [50, {value}]\n")
    with pytest.raises(YamlFileError, match=rf"n.yaml: line 4: {re.escape(field)}: a whole number of \d+ digits; "
                                            rf"at most {MAX_INT_DIGITS} are accepted"):
        read_yaml(f)


def test_long_strings_and_a_hundred_digits_are_no_numbers_too_long(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(f"a: '{'9' * 5000}'\nb: {'9' * MAX_INT_DIGITS}\nc: {'1' * 500}.5\n")
    doc = read_yaml(f)
    assert doc["a"] == "9" * 5000 and doc["b"] == int("9" * MAX_INT_DIGITS) and doc["c"] == float("inf")


def test_a_stored_folder_whose_experiment_yaml_nests_deep_is_named_by_every_reader(tmp_path, capsys):
    """Seen: as a stored folder's experiment.yaml it crashed `ls` for the
    whole results root (RecursionError), and verify and report too."""
    root = tmp_path / "results"
    bad, good = stored_copy("initcwnd@ci", root), stored_copy("reno_beta@ci", root)
    (bad / "experiment.yaml").write_text((bad / "experiment.yaml").read_text() + "\nx: " + "[" * 1000 + "]" * 1000)
    assert cli.main(["ls", "--results", str(root)]) == 0
    out = capsys.readouterr().out
    assert "initcwnd@ci              2/? done" in out and "reno_beta@ci             2/2 done" in out
    assert f"total unknown: its experiment.yaml does not give its runs ({bad / 'experiment.yaml'}: line " in out
    assert ": the file nests more" in out  # cut at 200 characters (host/versions.folder_runs)
    assert cli.main(["verify", str(root)]) == 0  # its runs checked by their records' experiment name, and said
    assert ": the file nests more" in capsys.readouterr().out
    assert cli.main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 0
    out, err = capsys.readouterr()
    assert "experiment.yaml does not validate with this version" in out and "Traceback" not in err
