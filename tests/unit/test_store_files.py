"""The store's writing side (host/store/files.py): whole files, no link
followed, nothing written outside the folder named (docs/faults.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tortoiselab.host import safefs
from tortoiselab.host.store import files


@pytest.fixture
def exp(tmp_path: Path) -> Path:
    d = tmp_path / "results" / "e"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim.txt"
    v.write_text("mine")
    return v


def test_write_file_replaces_whole_and_leaves_no_temporary(exp):
    files.write_file(exp, exp / "report.html", "one")
    files.write_file(exp, exp / "report.html", b"two")
    assert (exp / "report.html").read_text() == "two"
    assert sorted(os.listdir(exp)) == ["report.html"]


def test_write_file_never_writes_through_a_link(exp, victim):
    (exp / "report.html").symlink_to(victim)
    with pytest.raises(safefs.LinkRefused, match="report.html"):
        files.write_file(exp, exp / "report.html", "x")
    assert victim.read_text() == "mine"
    assert sorted(os.listdir(exp)) == ["report.html"]  # its temporary removed


def test_a_path_outside_the_folder_is_refused(exp, tmp_path):
    with pytest.raises(ValueError, match="is not in"):
        files.write_file(exp, tmp_path / "elsewhere.txt", "x")
    with pytest.raises(ValueError):
        files.remove(exp, exp.parent / "e2")
    assert not (tmp_path / "elsewhere.txt").exists()


def test_write_once_never_replaces_a_file_or_a_link(exp, victim):
    assert files.write_once(exp, exp / "experiment.json", "first") is True
    assert files.write_once(exp, exp / "experiment.json", "second") is False
    assert (exp / "experiment.json").read_text() == "first"
    (exp / "experiment.yaml").symlink_to(victim)
    assert files.write_once(exp, exp / "experiment.yaml", "x") is False
    assert victim.read_text() == "mine"
    assert sorted(os.listdir(exp)) == ["experiment.json", "experiment.yaml"]


def test_a_linked_experiment_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "e").symlink_to(elsewhere)
    with pytest.raises(safefs.LinkRefused):
        files.ensure_folder(tmp_path / "results" / "e")
    with pytest.raises(safefs.LinkRefused):
        files.write_file(tmp_path / "results" / "e", tmp_path / "results" / "e" / "x", "x")
    assert os.listdir(elsewhere) == []


def test_move_in_and_copy_in_refuse_a_link_where_they_write(exp, victim, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "server.pcap").write_bytes(b"pcap")
    run = files.make_dir(exp, exp / ".r.tmp-1")
    (run / "server.pcap").symlink_to(victim)
    with pytest.raises(safefs.LinkRefused):
        files.move_in(exp, work / "server.pcap", run / "server.pcap")
    (run / "console.log").symlink_to(victim)
    (work / "console.log").write_text("log")
    with pytest.raises(safefs.LinkRefused):
        files.copy_in(exp, work / "console.log", run / "console.log")
    assert victim.read_text() == "mine"
    (run / "server.pcap").unlink()
    files.move_in(exp, work / "server.pcap", run / "server.pcap")
    assert (run / "server.pcap").read_bytes() == b"pcap" and not (work / "server.pcap").exists()


def test_copy_in_copies_only_a_regular_file(exp, victim, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "commands.log").symlink_to(victim)
    os.mkfifo(work / "console.log")  # never waited on
    run = files.make_dir(exp, exp / ".r.tmp-1")
    assert files.copy_in(exp, work / "commands.log", run / "commands.log") is False
    assert files.copy_in(exp, work / "console.log", run / "console.log") is False
    assert files.copy_in(exp, work / "missing.log", run / "missing.log") is False
    (work / "native.log").write_text("n")
    assert files.copy_in(exp, work / "native.log", run / "native.log") is True
    assert os.listdir(run) == ["native.log"]


def test_a_results_file_is_written_whole_and_never_through_a_link(tmp_path, victim):
    results = tmp_path / "results"
    results.mkdir()
    assert files.write_results_file(results, "registry.json", "{}\n").read_text() == "{}\n"
    (results / "population-sensitivity.md").symlink_to(victim)
    with pytest.raises(safefs.LinkRefused):
        files.write_results_file(results, "population-sensitivity.md", "x")
    assert victim.read_text() == "mine"
    assert sorted(os.listdir(results)) == ["population-sensitivity.md", "registry.json"]


def test_a_lock_with_a_second_name_is_refused(exp, tmp_path):
    other = tmp_path / "other"
    other.write_text("keep")
    os.link(other, exp / ".lock")
    with pytest.raises(safefs.LinkRefused, match="2 names"):
        files.open_lock(exp, exp / ".lock", "locking")
    assert other.read_text() == "keep"


def test_move_aside_keeps_the_run_and_refuses_a_linked_damaged_folder(exp, tmp_path):
    (exp / "0123456789ab").mkdir()
    moved = files.move_aside(exp, "0123456789ab", ".damaged")
    assert moved.parent == exp / ".damaged" and moved.is_dir() and not (exp / "0123456789ab").exists()
    (exp / "ba9876543210").mkdir()
    os.rename(exp / ".damaged", tmp_path / "d")
    (exp / ".damaged").symlink_to(tmp_path / "d")
    with pytest.raises(Exception, match="not a folder"):
        files.move_aside(exp, "ba9876543210", ".damaged")
    assert (exp / "ba9876543210").is_dir()
