"""Bounded YAML (spec/yamlfile.py) and the experiment and region loaders
that use it: hostile or broken files are refused with the file named and a
short message, before anything is built from them."""

from __future__ import annotations

import time

import pytest

from tortoiselab.spec.experiment import ExperimentError, load
from tortoiselab.spec.regions import RegionError, read_regions_file
from tortoiselab.spec.yamlfile import MAX_VALUES, YamlFileError, excerpt, read_yaml


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
    with pytest.raises(YamlFileError, match="nests 101 levels deep"):
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
