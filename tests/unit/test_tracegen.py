"""The shipped traces come from their models (spec/tracegen.py), byte for
byte, with every model value sourced."""

import pytest
from pydantic import ValidationError

from tortoiselab.spec.trace import TRACE_DIR, Trace, shipped_traces
from tortoiselab.spec.tracegen import TraceModel, generate, load_models, median_mbit, write_all


def test_the_shipped_traces_are_what_their_models_give():
    lines = write_all(load_models(), check=True)
    assert lines and all(": ok" in ln for ln in lines), lines
    assert set(shipped_traces()) == set(load_models().traces) >= {"lte.down", "lte.up", "3g.down", "3g.up"}


def test_each_trace_has_its_published_median_and_loops_at_its_length():
    for name, tm in load_models().traces.items():
        t = Trace.model_validate(name)
        assert t.file == f"topologies/traces/{name}"  # recorded relative to the repository
        assert t.period_ms == tm.model.duration_s * 1000
        got = median_mbit(t.times_ms, tm.model.duration_s)
        assert got == pytest.approx(tm.model.median_mbit, rel=0.01), name


def test_the_same_model_gives_the_same_trace_and_another_seed_another():
    m = load_models().traces["3g.up"].model
    assert generate(m) == generate(m)
    assert generate(m) != generate(m.model_copy(update={"seed": m.seed + 7}))


def test_every_model_value_needs_a_source():
    tm = load_models().traces["lte.down"].model_dump()
    del tm["sources"]["dwell_ms"]
    with pytest.raises(ValidationError, match="no entry for dwell_ms"):
        TraceModel.model_validate(tm)
    tm["sources"]["dwell_ms"] = "Assumption: a guess"
    with pytest.raises(ValidationError, match="bare word 'assumption'"):
        TraceModel.model_validate(tm)
    assert (TRACE_DIR / "models.yaml").is_file()
