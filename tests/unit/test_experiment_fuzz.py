"""A fuzz pass on the experiment schema (Hypothesis): any generated file is
either accepted, and then expands into runs as `tortoise validate` does, or
refused with an ExperimentError that names the file or the field; never a
traceback, never an error message that quotes a whole document."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tortoiselab.spec.experiment import ClientCfg, ExperimentError, PathCfg, ServerCfg, expand, load

SECTIONS = {"path": PathCfg, "server": ServerCfg, "client": ClientCfg}
GOOD = {
    "path.rtt_ms": [0, 20, 200.5], "path.loss_pct": [0, 1, 2.5], "path.rate_mbit": [1, 10],
    "path.region": ["india-mobile-2017", "us-desktop-2017", "atlantis"],
    "server.cc": ["cubic", "hybla", "reno_beta", "cubic_plus", "bogus"],
    "server.initcwnd_pkts": [1, 10, 30], "client.page": ["feed.html", "tiny.html", "nope.html"],
    "client.loader": ["loader", "h2load", "nghttp", "chrome"], "client.url": ["objects/1000000.bin", None],
}

scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
)
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                     max_leaves=8)


def _field_values(key: str) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(GOOD[key]), scalar) if key in GOOD else scalar


@st.composite
def section(draw, name: str) -> dict:
    fields = list(SECTIONS[name].model_fields)
    keys = draw(st.lists(st.sampled_from(fields + ["bogus_field"]), max_size=4, unique=True))
    return {k: draw(_field_values(f"{name}.{k}")) for k in keys}


axis_key = st.one_of(st.sampled_from(list(GOOD)), st.text(max_size=12),
                     st.sampled_from(["path.rtt_ms+path.loss_pct", "server.cc+server.cc", "server.nothing"]))


@st.composite
def experiment(draw) -> dict:
    doc: dict = {}
    if draw(st.booleans()):
        doc["name"] = draw(st.one_of(st.sampled_from(["fuzz", "a-b_c", "Bad Name", ""]), st.text(max_size=10)))
    for k, strat in (("repetitions", st.one_of(st.integers(-2, 4), scalar)),
                     ("seed", st.one_of(st.integers(-1, 2**64), scalar)), ("paired", scalar),
                     ("description", scalar)):
        if draw(st.booleans()):
            doc[k] = draw(strat)
    for name in SECTIONS:
        if draw(st.booleans()):
            doc[name] = draw(st.one_of(section(name), value))
    if draw(st.booleans()):
        doc["sweep"] = draw(st.one_of(
            st.dictionaries(axis_key, st.one_of(st.lists(_field_values("server.cc"), max_size=3), value),
                            max_size=2), value))
    if draw(st.booleans()):
        doc["exclude"] = draw(st.one_of(st.lists(st.dictionaries(axis_key, scalar, max_size=2), max_size=2), value))
    if draw(st.booleans()):
        doc["grids"] = draw(st.one_of(st.dictionaries(st.sampled_from(["ci", "Bad", "x"]), st.one_of(
            st.fixed_dictionaries({"repetitions": st.integers(0, 3)}), value), max_size=2), value))
    if draw(st.booleans()):
        doc[draw(st.text(max_size=8))] = draw(value)
    return doc


def _dump(doc: dict) -> str:
    # YAML has .nan/.inf; everything else round-trips through safe_dump
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


# a line starts with the file's path or a field's dotted location (quoted
# parts for odd keys), e.g. "sweep.server.cc[1]: ..." or "grids.ci.'': ..."
# (a Python repr, so a quote inside is escaped: grids.'\'"')
NAMED = re.compile(r"^\s*(/\S+: |((\w[\w+@\-]*|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")(\[\d+\])?\.?)+: |\(top level\): )")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(doc=experiment())
def test_any_file_is_accepted_or_refused_by_field(tmp_path, doc):
    f = tmp_path / "fuzz.yaml"
    f.write_text(_dump(doc))
    try:
        exp = load(f)
    except ExperimentError as exc:
        msg = str(exc)
        assert msg and len(msg) < 20000, len(msg)
        for line in msg.splitlines():
            assert NAMED.match(line), f"an error line that names no field: {line!r}"
        if "name" not in doc:  # required (results/<name>): refused naming the field and the fix
            assert any(line.startswith("name: Field required") and "e.g. name: " in line
                       for line in msg.splitlines()), msg
        return
    assert "name" in doc, "a file without a name was accepted"
    runs = expand(exp)  # accepted: it must expand as validate does
    assert runs and all(r.run_id and r.config["path"]["resolved"] for r in runs)
    for r in runs:
        assert all(math.isfinite(v) for v in r.path.model_dump().values() if isinstance(v, float))


def test_validate_on_the_cli_never_shows_a_traceback(tmp_path):
    """The same through `tortoise validate`, for a handful of bad files."""
    bad = ["name: x\nrepetitions: .nan\n", "name: x\nsweep: {server.cc: [cubic, 7]}\n",
           "name: x\npath: [1, 2]\n", "- a\n- b\n", "name: x\ngrids: {ci: 3}\n",
           "name: x\nserver: {module_params: {reno_beta: {beta: 2}}}\n"]
    for i, text in enumerate(bad):
        f = tmp_path / f"b{i}.yaml"
        f.write_text(text)
        p = subprocess.run([sys.executable, "-m", "tortoiselab.cli", "validate", str(f)], capture_output=True,
                           text=True, cwd=REPO, timeout=60)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (text, p.stderr)
