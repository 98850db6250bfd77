"""The stored run record is typed end to end (issue 53, format 6): its JSON
schema (RunRecord.model_json_schema()) has no free-form object, every
metric of spec/cols.METRICS is a field of the loader's summary, the typed
parts match what the code that makes them writes, and the records stored by
older versions (tests/data) read into the typed record without a number
changing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tortoiselab.analysis.conntable import analyze_pcap
from tortoiselab.analysis.fidelity import Check
from tortoiselab.analysis.flights import handshake_summary
from tortoiselab.analysis.parsers import parse_h2load
from tortoiselab.browser.summary import summarize as browser_summarize
from tortoiselab.client.summary import summarize
from tortoiselab.host import store
from tortoiselab.spec.cols import METRICS
from tortoiselab.spec.measured import FidelityCheck, LoadSummary, ServerConnection, StoredPath, TraceRef
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.trace import Trace

DATA = Path(__file__).resolve().parents[1] / "data"
# JSON Schema keywords whose values are schemas (or maps / lists of them); "default" and the like are not
SUB_SCHEMA = ("additionalProperties", "items")
SUB_SCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAPS = ("properties", "$defs", "patternProperties")


def free_form(schema: Any, where: str = "$") -> list[str]:
    """Where a JSON schema admits an object of any keys or a value of any
    type: an empty schema ({}: Any), additionalProperties true, or an object
    that does not say what its other keys hold (pydantic's extra="ignore")."""
    if not isinstance(schema, dict):
        return []
    out = []
    keys = set(schema) - {"title", "description", "default"}
    if not keys:
        out.append(f"{where}: any value")
    extra = schema.get("additionalProperties")
    if extra is True or (schema.get("type") == "object" and "additionalProperties" not in schema):
        out.append(f"{where}: an object of any other keys")
    for k in SUB_SCHEMA:
        if isinstance(schema.get(k), dict):
            out += free_form(schema[k], f"{where}.{k}")
    for k in SUB_SCHEMAS:
        for i, sub in enumerate(schema.get(k) or []):
            out += free_form(sub, f"{where}.{k}[{i}]")
    for k in SCHEMA_MAPS:
        for name, sub in (schema.get(k) or {}).items():
            out += free_form(sub, f"{where}.{k}.{name}")
    return out


def test_the_stored_record_has_no_free_form_object():
    schema = store.RunRecord.model_json_schema()
    assert len(schema["$defs"]) >= 20  # the typed parts are there to be walked
    assert free_form(schema) == []


class _Loose(BaseModel):
    summary: dict[str, Any]


class _Ignoring(BaseModel):
    x: int


@pytest.mark.parametrize("model, found", [(_Loose, "$.properties.summary"), (_Ignoring, "$")])
def test_the_check_finds_a_free_form_object(model, found):
    assert any(w.startswith(found) for w in free_form(model.model_json_schema()))


def test_every_metric_is_a_field_of_the_summary():
    assert set(METRICS) <= set(LoadSummary.model_fields)


def test_the_typed_parts_have_the_fields_the_code_writes():
    assert set(StoredPath.model_fields) == set(PathSpec.model_fields)
    assert set(TraceRef.model_fields) == set(Trace.model_fields)
    assert list(FidelityCheck.model_fields) == [f.name for f in dataclasses.fields(Check)]
    conns = [handshake_summary(c) for c in analyze_pcap(DATA / "flights_iw10.pcap")]
    assert conns and [ServerConnection.model_validate(c).model_dump() for c in conns] == conns
    # our loader's summary of a load that failed before its first request, every key typed
    s = summarize([], [], [], settings={"url": "https://www.lab.test/", "protocol": "h2", "seed": 1},
                  cached_urls=[], assets_found=0, error="no route")
    assert LoadSummary.model_validate(s).model_dump(include=set(s)) == s
    # Chromium's summary of a load that read no timings, and h2load's parsed output
    b = browser_summarize(events=[], timings=None, console_errors=[], error="no page",
                          settings={"url": "https://www.lab.test/", "protocol": "h2"}, images=[])
    assert LoadSummary.model_validate(b).model_dump(include=set(b)) == b
    h = {"rc": 0, "error": None, **parse_h2load((DATA / "h2load_1mb.txt").read_text()), "raw": "..."}
    assert LoadSummary.model_validate(h).model_dump(include=set(h)) == h


def test_a_summary_with_a_key_no_loader_writes_is_refused_by_name():
    with pytest.raises(ValidationError, match="plt_msec"):
        LoadSummary.model_validate({"plt_msec": 1.0})


def _same(raw: Any, typed: Any, where: str = "") -> list[str]:
    """Where a stored value and the typed record's differ (value or type);
    a key the typed record adds must be empty (None, [], {})."""
    if isinstance(raw, dict):
        out = [f"{where}.{k}: lost" for k in raw if k not in typed]
        out += [f"{where}.{k}: added {v!r}" for k, v in typed.items() if k not in raw and v not in (None, [], {})]
        return out + [d for k in raw if k in typed for d in _same(raw[k], typed[k], f"{where}.{k}")]
    if isinstance(raw, list):
        if not isinstance(typed, list) or len(raw) != len(typed):
            return [f"{where}: {raw!r} became {typed!r}"]
        return [d for i, (a, b) in enumerate(zip(raw, typed)) for d in _same(a, b, f"{where}[{i}]")]
    return [] if (raw, type(raw)) == (typed, type(typed)) else [f"{where}: {raw!r} became {typed!r}"]


STORED = sorted(DATA.glob("**/run.json"))


@pytest.mark.parametrize("f", STORED, ids=lambda f: f"{f.parent.parent.name}/{f.parent.name}")
def test_older_records_read_into_the_typed_record_with_the_same_numbers(f):
    raw = json.loads(f.read_text())
    up = store.upgrade(raw, f.parent)
    rec = store.RunRecord.model_validate(up)
    assert rec.format_version == store.FORMAT_VERSION
    assert _same(json.loads(json.dumps(up)), rec.model_dump(mode="json")) == []
    again = store.RunRecord.model_validate_json(rec.model_dump_json())  # as write_record stores it
    assert again == rec


def test_stored_records_of_older_formats_are_in_the_data():
    versions = {json.loads(f.read_text()).get("format_version", 1) for f in STORED}
    assert len(STORED) >= 20 and 1 in versions and max(versions) < store.FORMAT_VERSION, versions


def test_a_record_with_a_part_the_types_do_not_know_is_named_not_raised():
    rec = json.loads((DATA / "runs" / "tortoise@ci" / "7084663580c8" / "run.json").read_text())
    assert store.record_problem(store.upgrade(rec)) is None
    rec = store.upgrade(rec)
    rec["cross"] = {"flows": [], "jitter": 1}
    assert store.record_problem(rec) == "cross.jitter: Extra inputs are not permitted"
