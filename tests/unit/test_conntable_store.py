"""The run's connections table (issue 40, Build 2): server.pcap parsed once
in the guest and stored as connections.json (analysis/conntable.py), read
by host/store/captures.py, which parses the capture only for runs stored
before the table. The canned runs (tests/data/runs) have no table: each
test writes one with the guest's own function (capture_table)."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tortoiselab import studies as S
from tortoiselab.analysis import conntable, flights
from tortoiselab.host import determinism as D, manifests
from tortoiselab.host import safefs, verify
from tortoiselab.host.store import captures
from tortoiselab.studies import connections, maps

DATA = Path(__file__).resolve().parents[1] / "data"
RUNS = DATA / "runs"
PCAPS = sorted(RUNS.glob("*/*/server.pcap"))
INITCWND = "initcwnd@ci"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(captures.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "flights"


def _copy(tmp_path: Path, name: str, tables: bool) -> Path:
    """A copy of a canned experiment folder, each run with its table (as the
    guest writes it) when tables, and then its manifest made again over its
    files (the table among them), as the runner stores a run."""
    exp = tmp_path / ("with" if tables else "without") / name
    shutil.copytree(RUNS / name, exp)
    for pcap in exp.glob("*/server.pcap") if tables else ():
        (pcap.parent / conntable.TABLE).write_text(json.dumps(conntable.capture_table(pcap)))
        (pcap.parent / manifests.MANIFEST).unlink(missing_ok=True)
        manifests.write_manifest(pcap.parent)
    return exp


def _no_parse(monkeypatch) -> None:
    """Parsing a capture without its series fails: only a table can answer."""
    real = captures.analyze_pcap

    def refuse(path, port=443, keep_series=True):
        assert keep_series, f"{path} parsed where its table should have been read"
        return real(path, port, keep_series)
    monkeypatch.setattr(captures, "analyze_pcap", refuse)


def test_the_canned_runs_have_captures_and_no_tables():
    assert len(PCAPS) >= 20 and not list(RUNS.glob(f"*/*/{conntable.TABLE}"))


@pytest.mark.parametrize("pcap", PCAPS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_the_table_is_the_capture_parsed(pcap, tmp_path, cache, monkeypatch):
    """Every canned run's connections, read from its table and parsed from
    its capture (no table: the user's cache), are the same dicts, so every
    number a reader takes from them is too."""
    exp = tmp_path / pcap.parent.parent.name
    shutil.copytree(pcap.parent, exp / pcap.parent.name)
    run = exp / pcap.parent.name
    parsed = captures.connections(run)
    assert parsed and len(list(cache.iterdir())) == 1  # parsed once, kept in the user's cache
    table = conntable.capture_table(run / "server.pcap")
    (run / conntable.TABLE).write_text(json.dumps(table, indent=1, sort_keys=True))  # as the guest writes it
    shutil.rmtree(cache)
    _no_parse(monkeypatch)
    assert captures.connections(run) == parsed
    assert not cache.exists()  # a table is read, nothing parsed nor kept
    assert all("series" not in c for c in table["connections"])


def test_the_studies_numbers_are_the_same_from_tables(tmp_path, cache, monkeypatch):
    """initcwnd@ci (the studies' readers of flights: first_conn, transfer,
    the second load's window, the map cause, the physics checks, the
    determinism fingerprint's retransmissions, the initcwnd claims'
    verdicts) with and without tables."""
    def numbers(exp: Path) -> dict:
        runs = sorted(p.parent for p in exp.glob("*/server.pcap"))
        out = {}
        for r in runs:
            c = connections.first_conn(r)
            out[r.name] = (c, connections.transfer(c), connections.second_load_window(r), maps.capture_cause(r),
                           D.fingerprint(r).retransmissions)
        checks = S.physics_checks(exp)
        verdicts = S.evaluate("initcwnd", exp.parent, "ci")  # the claims that read the first flights
        return {"runs": out, "physics": [(c.name, c.ok, c.n, c.measured, c.detail) for c in checks],
                "verdicts": [(v.claim_id, v.verdict, v.value, v.measured) for v in verdicts]}

    without = numbers(_copy(tmp_path, INITCWND, tables=False))
    with_tables = _copy(tmp_path, INITCWND, tables=True)
    shutil.rmtree(cache)
    _no_parse(monkeypatch)
    assert numbers(with_tables) == without
    assert not cache.exists()
    assert any(v[0] is not None for v in without["runs"].values()) and any(p[2] for p in without["physics"])
    assert any(v[1] not in ("no data", "not testable here") for v in without["verdicts"])


def test_a_table_of_other_bytes_or_a_link_is_refused(tmp_path, cache):
    exp = _copy(tmp_path, INITCWND, tables=True)
    run = sorted(p.parent for p in exp.glob("*/server.pcap"))[0]
    table = run / conntable.TABLE
    raw = json.loads(table.read_text())
    table.write_text(json.dumps({**raw, "capture_sha256": "0" * 64}))
    with pytest.raises(captures.DamagedTable, match=r"capture_sha256 0000.* is not the capture's .*fix: `tortoise run"):
        connections.first_conn(run)
    table.write_text(json.dumps(raw)[:200])  # cut short
    with pytest.raises(captures.DamagedTable, match=rf"{conntable.TABLE}: not the table of"):
        captures.connections(run)
    table.write_text(json.dumps({**raw, "connections": {"a": 1}}))
    with pytest.raises(captures.DamagedTable, match="connections: not a list"):
        captures.connections(run)
    victim = tmp_path / "elsewhere.json"
    victim.write_text(json.dumps(raw))
    table.unlink()
    table.symlink_to(victim)  # the very table, but through a link: never followed
    with pytest.raises(captures.DamagedTable, match="is a link"):
        captures.connections(run)
    assert not cache.exists()


def test_a_table_of_another_format_is_read_as_absent(tmp_path, cache):
    """A table stored by an older analysis (conntable.TABLE_FORMAT raised
    since): the capture is parsed again by today's code."""
    exp = _copy(tmp_path, INITCWND, tables=True)
    run = sorted(p.parent for p in exp.glob("*/server.pcap"))[0]
    want = captures.connections(run)
    raw = json.loads((run / conntable.TABLE).read_text())
    (run / conntable.TABLE).write_text(json.dumps({**raw, "format": 0, "connections": []}))
    assert captures.connections(run) == want and len(list(cache.iterdir())) == 1


def test_an_edited_table_is_caught_by_verify(tmp_path):
    """The table is a file of the run like any: in its manifest, so an edit
    that keeps its capture's sha256 (which the reader cannot see) is what
    `tortoise verify` names."""
    exp = _copy(tmp_path, INITCWND, tables=True)
    run = sorted(p.parent for p in exp.glob("*/server.pcap"))[0]
    assert conntable.TABLE in json.loads((run / manifests.MANIFEST).read_text())["files"]
    assert verify.check_run(run)[0] == []
    table = run / conntable.TABLE
    raw = json.loads(table.read_text())
    raw["connections"][0]["data_bytes"] += 1
    table.write_text(json.dumps(raw))
    problems, _ = verify.check_run(run)
    assert [p.file.name for p in problems] == [conntable.TABLE]


def test_a_run_without_a_capture_has_no_connections(tmp_path, cache):
    exp = _copy(tmp_path, INITCWND, tables=True)
    run = sorted(p.parent for p in exp.glob("*/server.pcap"))[0]
    (run / "server.pcap").unlink()
    assert captures.connections(run) == [] and connections.first_conn(run) is None
    assert maps.capture_cause(run) is None
    os.mkfifo(run / "server.pcap")  # a FIFO in the capture's place: refused, never waited on
    with pytest.raises(safefs.NotRegular):
        captures.connections(run)


def test_the_guests_handshake_figures_come_from_the_parse_a_client_side_capture_too():
    """A capture not taken at the sender splits its flights by silence
    (flights' "gap" method), which needs the parsed series: the guest's
    handshake figures come from parse_capture's connections, the stored
    table leaves the series out (before this, the pop topology's loads
    failed with KeyError: 'series')."""
    pcap = DATA / "flights_iw3_client.pcap"
    table, parsed = conntable.parse_capture(pcap)
    assert [c["flight_method"] for c in parsed] == ["gap"]
    assert all("series" not in c for c in table["connections"])
    summary = flights.handshake_summary(parsed[0])
    assert summary == flights.handshake_summary(conntable.analyze_pcap(pcap, keep_series=False)[0])
    assert conntable.capture_table(pcap) == table
