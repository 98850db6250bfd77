"""No link is followed inside a results folder (host/safefs.py;
docs/faults.md): a victim file or folder behind a link planted where the
runner, `tortoise clean`, the store, the lab assets, the report or the
studies' cache write is byte-identical afterwards, and the refusal names
the link and the fix. Real folders, real links."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import TORTOISE, experiment_yaml, write_yaml
from tortoiselab.host import safefs, store
from tortoiselab.host.assets import lab_assets
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.locks import claim, clean_results, experiment_lock, probe_claim, setup_lock
from tortoiselab.spec.experiment import expand, load

CANNED = Path(__file__).resolve().parents[1] / "data" / "runs" / "coalescing@ci"
TINY = experiment_yaml("tiny")


def _state(root: Path) -> dict[str, str]:
    """Every file below root (links as links) -> its bytes' digest or link target."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(root))] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[str(p.relative_to(root))] = "dir"
    return out


@pytest.fixture
def victim(tmp_path):
    """A folder outside the results folder with a file that must not change."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "precious").write_text("do not truncate me\n")
    return v


def _refused(exc: pytest.ExceptionInfo, link: Path) -> None:
    msg = str(exc.value)
    assert str(link) in msg and "is a link" in msg and f"rm {link}" in msg, msg


@pytest.mark.parametrize("name", [".lock", ".setup.lock"])
def test_a_lock_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, victim, name):
    exp_dir = tmp_path / "res" / "tiny"
    exp_dir.mkdir(parents=True)
    (exp_dir / name).symlink_to(victim / "precious")
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        with (experiment_lock if name == ".lock" else setup_lock)(exp_dir):
            pass
    _refused(exc, exp_dir / name)
    assert _state(victim) == before


def test_tortoise_clean_leaves_a_linked_lock_alone_and_says_so(tmp_path, victim):
    res = tmp_path / "res"
    (res / "tiny").mkdir(parents=True)
    (res / "tiny" / ".lock").symlink_to(victim / "precious")
    before = _state(victim)
    p = subprocess.run([*TORTOISE, "clean", "--results", str(res)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr  # left in place for you (docs/running.md, exit codes of clean)
    assert _state(victim) == before
    assert p.stdout.startswith("tiny: left alone: ") and f"{res}/tiny/.lock (a link to {victim}" in p.stdout


def test_a_claim_that_is_a_link_is_refused(tmp_path, victim):
    exp_dir = tmp_path / "tiny"
    (exp_dir / ".claims").mkdir(parents=True)
    (exp_dir / ".claims" / "0123456789ab.lock").symlink_to(victim / "precious")
    before = _state(victim)
    for hold in (claim, probe_claim):
        with pytest.raises(safefs.LinkRefused) as exc:
            with hold(exp_dir, "0123456789ab"):
                pass
        _refused(exc, exp_dir / ".claims" / "0123456789ab.lock")
    assert _state(victim) == before


def test_a_claims_folder_that_is_a_link_is_refused(tmp_path, victim):
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    (exp_dir / ".claims").symlink_to(victim)
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        with claim(exp_dir, "0123456789ab"):
            pass
    _refused(exc, exp_dir / ".claims")
    assert _state(victim) == before


@pytest.fixture
def foreign():
    """A process group of this test's own, foreign to any lab, that a planted
    uml.pgid names (never a fixed pid: run against unfixed code, a test must
    signal nothing but its own process); ended by its pid afterwards."""
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_clean_leaves_linked_work_folders_in_place_and_says_so(tmp_path, victim, foreign):
    """`tortoise clean` says what it did not do: links it leaves in place
    are named as such, never reported as removed."""
    res = tmp_path / "res"
    exp_dir = res / "tiny"
    exp_dir.mkdir(parents=True)
    (victim / "lab").mkdir()
    (victim / "lab" / "uml.pgid").write_text(str(foreign.pid))
    for name in (".aaaaaaaaaaaa.tmp-1", ".lab.tmp-1", ".runs.parquet.tmp-1"):
        (exp_dir / name).symlink_to(victim if "parquet" not in name else victim / "precious")
    (exp_dir / ".bbbbbbbbbbbb.tmp-2").mkdir()  # a real one, removed
    before = _state(victim)
    lines, n = clean_results(res)
    assert _state(victim) == before
    assert n == 1 and "tiny: removed .bbbbbbbbbbbb.tmp-2" in lines, lines
    for name in (".aaaaaaaaaaaa.tmp-1", ".lab.tmp-1", ".runs.parquet.tmp-1"):
        said = [ln for ln in lines if name in ln]
        assert len(said) == 1 and said[0].startswith(f"tiny: left {name} in place: it is a link to "), lines
        assert (exp_dir / name).is_symlink()
    assert not any("removed .aaaaaaaaaaaa" in ln or "removed .lab" in ln for ln in lines)
    time.sleep(0.2)
    assert foreign.poll() is None


def test_clean_does_not_enter_an_experiment_folder_that_is_a_link(tmp_path, victim):
    res = tmp_path / "res"
    res.mkdir()
    (victim / ".aaaaaaaaaaaa.tmp-1").mkdir()
    (res / "tiny").symlink_to(victim)
    before = _state(victim)
    lines, n = clean_results(res)
    assert _state(victim) == before and n == 0
    assert lines == [f"tiny: left alone: it is a link to {victim}; clean it where it points, or remove the link"]


def test_a_stale_work_folder_with_a_linked_record_signals_nothing(tmp_path, victim, foreign):
    """Links inside a work folder are not followed to read a pgid; the
    folder is removed, its links as links (their targets untouched)."""
    exp_dir = tmp_path / "res" / "tiny"
    (exp_dir / ".aaaaaaaaaaaa.tmp-1").mkdir(parents=True)
    (victim / "uml.pgid").write_text(str(foreign.pid))
    _linked_record(exp_dir, victim)
    time.sleep(0.2)
    assert foreign.poll() is None, "a group named behind a link was signalled"


def _linked_record(exp_dir: Path, victim: Path) -> None:
    (exp_dir / ".aaaaaaaaaaaa.tmp-1" / "lab").symlink_to(victim)
    (exp_dir / ".cccccccccccc.tmp-1" / "lab").mkdir(parents=True)
    (exp_dir / ".cccccccccccc.tmp-1" / "lab" / "uml.pgid").symlink_to(victim / "uml.pgid")
    before = _state(victim)
    lines, _ = clean_results(exp_dir.parent)
    assert _state(victim) == before
    assert not (exp_dir / ".cccccccccccc.tmp-1").exists() and not (exp_dir / ".aaaaaaaaaaaa.tmp-1").exists()
    a_lab = exp_dir / ".aaaaaaaaaaaa.tmp-1" / "lab"
    assert lines[:4] == [
        f"tiny: did not signal the lab of .aaaaaaaaaaaa.tmp-1: {a_lab} (a link to {victim}) is a "
        f"link, and nothing in a results folder follows links (docs/faults.md); remove it (rm {a_lab}) or use "
        "another --results",
        "tiny: removed .aaaaaaaaaaaa.tmp-1",  # its link removed as a link
        f"tiny: did not signal the lab of .cccccccccccc.tmp-1: {exp_dir}/.cccccccccccc.tmp-1/lab/uml.pgid (a link to "
        f"{victim}/uml.pgid) is a link, and nothing in a results folder follows links (docs/faults.md); remove it "
        f"(rm {exp_dir}/.cccccccccccc.tmp-1/lab/uml.pgid) or use another --results",
        "tiny: removed .cccccccccccc.tmp-1"], lines


def test_runs_parquet_and_its_temporary_are_never_written_through(tmp_path, victim):
    exp_dir = tmp_path / "tiny"
    shutil.copytree(CANNED, exp_dir)
    before = _state(victim)
    tmp = exp_dir / f".{store.TABLE}.tmp-{os.getpid()}"
    tmp.symlink_to(victim / "precious")
    with pytest.raises(safefs.LinkRefused) as exc:
        store.rebuild_table(exp_dir)
    _refused(exc, tmp)
    tmp.unlink()
    (exp_dir / store.TABLE).unlink(missing_ok=True)
    (exp_dir / store.TABLE).symlink_to(victim / "precious")
    with pytest.raises(safefs.LinkRefused) as exc:
        store.rebuild_table(exp_dir)
    _refused(exc, exp_dir / store.TABLE)
    assert _state(victim) == before
    (exp_dir / store.TABLE).unlink()
    assert store.rebuild_table(exp_dir).is_file()  # without the links it is written as ever


def test_a_record_is_never_written_through_a_link(tmp_path, victim):
    run = tmp_path / "tiny" / ".0123456789ab.tmp-1"
    run.mkdir(parents=True)
    (run / store.RECORD).symlink_to(victim / "precious")
    rec = json.loads((CANNED / "902b168b050c" / "run.json").read_text())
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused):
        store.write_record(run, rec)
    assert _state(victim) == before


@pytest.mark.parametrize("planted", [".lab", ".lab.tmp"])
def test_lab_assets_are_never_made_through_a_link(tmp_path, victim, planted):
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    link = exp_dir / (".lab" if planted == ".lab" else f".lab.tmp-{os.getpid()}")
    link.symlink_to(victim)
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        lab_assets(exp_dir)
    _refused(exc, link)
    assert _state(victim) == before


@pytest.mark.parametrize("planted", ["pki", "pki/large", "pki/pki.json", "pki.tmp"])
def test_certificate_variants_are_never_added_through_a_link(tmp_path, victim, planted):
    """A PKI made with the `shared` group only, a later invocation needing
    `large` (host/assets._extend_pki): a link where it reads, makes or moves
    is refused, and neither its target nor the PKI is touched."""
    exp_dir = tmp_path / "tiny"
    exp_dir.mkdir()
    lab_assets(exp_dir, certs={"shared"})
    link = exp_dir / ".lab" / (f"pki.tmp-{os.getpid()}" if planted == "pki.tmp" else planted)
    if planted == "pki":
        os.rename(link, tmp_path / "elsewhere")
        link.symlink_to(tmp_path / "elsewhere")
    else:
        shutil.rmtree(link) if link.is_dir() and not link.is_symlink() else link.unlink(missing_ok=True)
        link.symlink_to(victim)
    before, pki_before = _state(victim), _state(exp_dir / ".lab")
    with pytest.raises(safefs.LinkRefused) as exc:
        lab_assets(exp_dir, certs={"large"})
    _refused(exc, link)
    assert _state(victim) == before and _state(exp_dir / ".lab") == pki_before


def test_the_report_is_never_written_through_a_link(tmp_path, victim):
    from tortoiselab.report import write_report  # here: matplotlib and jinja only for this test

    exp_dir = tmp_path / "coalescing@ci"
    shutil.copytree(CANNED, exp_dir)
    (exp_dir / "report.html").symlink_to(victim / "precious")
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        write_report(exp_dir, n_resamples=50)
    _refused(exc, exp_dir / "report.html")
    assert _state(victim) == before


def test_the_studies_cache_is_never_written_through_a_link(tmp_path, victim, monkeypatch):
    """.studies-cache, where folders of before kept analysed captures (now
    the user's cache: host/store/captures.cache_dir), as a link: untouched."""
    from tortoiselab.host.store import captures
    from tortoiselab.studies import connections

    monkeypatch.setenv(captures.CACHE_ENV, str(tmp_path / "cache"))
    exp_dir = tmp_path / "coalescing@ci"
    shutil.copytree(CANNED, exp_dir)
    (exp_dir / ".studies-cache").symlink_to(victim)
    run = sorted(d for d in exp_dir.iterdir() if (d / "server.pcap").exists())
    before = _state(victim)
    for d in run[:1]:
        connections.first_conn(d)
    assert _state(victim) == before


def _tiny_folder(tmp_path: Path) -> tuple[Path, Path]:
    f = write_yaml(tmp_path, TINY, "tiny.yaml")
    return f, tmp_path / "res" / "tiny"


def _run(f: Path, res: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TORTOISE, "run", str(f), "--results", str(res), "--backend", "uml"],
                          capture_output=True, text=True, timeout=120)


def test_run_refuses_a_linked_experiment_yaml_before_anything_is_made(tmp_path, victim):
    f, exp_dir = _tiny_folder(tmp_path)
    exp_dir.mkdir(parents=True)
    (exp_dir / "experiment.yaml").symlink_to(victim / "created-by-tortoise.yaml")
    before = _state(victim)
    p = _run(f, exp_dir.parent)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{exp_dir}/experiment.yaml (a link to {victim}/created-by-tortoise.yaml) is a link" in p.stderr
    assert f"rm {exp_dir}/experiment.yaml" in p.stderr
    assert _state(victim) == before
    assert sorted(x.name for x in exp_dir.iterdir()) == ["experiment.yaml"]  # nothing made, not even .lock


def test_run_refuses_a_linked_run_folder_and_leaves_no_work(tmp_path, victim):
    """A run-id folder that is a link: a clear error naming it and the fix,
    before any lab boots; no .tmp or -boot folder left."""
    f, exp_dir = _tiny_folder(tmp_path)
    run_id = expand(load(f))[0].run_id
    exp_dir.mkdir(parents=True)
    (exp_dir / run_id).symlink_to(victim)
    before = _state(victim)
    p = _run(f, exp_dir.parent)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{exp_dir}/{run_id} (a link to {victim}) is a link" in p.stderr and "Traceback" not in p.stderr
    assert f"rm {exp_dir}/{run_id}" in p.stderr and "another --results" in p.stderr
    assert _state(victim) == before
    assert sorted(x.name for x in exp_dir.iterdir()) == [run_id]


def test_run_refuses_an_experiment_folder_that_is_a_link(tmp_path, victim):
    f, exp_dir = _tiny_folder(tmp_path)
    exp_dir.parent.mkdir(parents=True)
    exp_dir.symlink_to(victim)
    before = _state(victim)
    p = _run(f, exp_dir.parent)
    assert p.returncode == 2 and f"{exp_dir} (a link to {victim}) is a link" in p.stderr, p.stderr
    assert _state(victim) == before


# --- the helpers themselves ------------------------------------------------------------


def test_a_link_above_the_file_is_refused_too(tmp_path, victim):
    root = tmp_path / "res"
    root.mkdir()
    (root / "tiny").symlink_to(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        safefs.write_text(root / "tiny" / "precious", "x", root)
    _refused(exc, root / "tiny")
    with pytest.raises(safefs.LinkRefused):
        safefs.makedirs(root / "tiny" / "a" / "b", root)
    with pytest.raises(safefs.LinkRefused):
        safefs.rmtree(root / "tiny", root)
    assert (root / "tiny").is_symlink() and (victim / "precious").read_text() == "do not truncate me\n"
    assert not (victim / "a").exists()


def test_the_root_itself_may_be_a_link(tmp_path):
    """results -> /scratch/results is the user's choice; only what is below it is checked."""
    real = tmp_path / "scratch"
    real.mkdir()
    (tmp_path / "results").symlink_to(real)
    safefs.makedirs(tmp_path / "results" / "tiny" / ".claims", tmp_path / "results")
    safefs.write_text(tmp_path / "results" / "tiny" / "f", "ok", tmp_path / "results")
    assert (real / "tiny" / "f").read_text() == "ok" and (real / "tiny" / ".claims").is_dir()


def test_refusal_names_every_link_of_a_folder(tmp_path, victim):
    exp_dir = tmp_path / "tiny"
    (exp_dir / ".claims").mkdir(parents=True)
    (exp_dir / "runs.parquet").symlink_to(victim / "precious")
    (exp_dir / ".claims" / "x.lock").symlink_to(victim / "precious")
    with pytest.raises(RunnerError) as exc:
        safefs.refuse_links(exp_dir, "results folder")
    assert str(exc.value) == (
        f"results folder: {exp_dir}/.claims/x.lock (a link to {victim}/precious), {exp_dir}/runs.parquet (a link to "
        f"{victim}/precious) are links, and nothing in a results folder follows links (docs/faults.md); remove them "
        f"(rm {exp_dir}/.claims/x.lock {exp_dir}/runs.parquet) or use another --results")


NAMES = st.sampled_from(["a", "b", ".lock", "run.json", ".claims", "x.tmp-1"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=3), st.booleans()), min_size=1, max_size=4),
       ops=st.lists(st.tuples(st.sampled_from(["write", "mkdir", "rmtree", "replace", "open"]),
                              st.lists(NAMES, min_size=1, max_size=3)), min_size=1, max_size=8))
def test_no_operation_changes_anything_outside_the_root(tmp_path_factory, links, ops):
    """Links planted anywhere in a folder, then any sequence of the helpers'
    operations on any paths below it: outside the folder nothing changes."""
    base = tmp_path_factory.mktemp("prop")
    root, outside = base / "res", base / "victim"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious").write_text("x" * 10)
    (outside / "sub" / "more").write_text("y")
    root.mkdir()
    for parts, to_dir in links:
        p = root.joinpath(*parts)
        try:
            safefs.makedirs(p.parent, root) if len(parts) > 1 else None
            p.symlink_to(outside / ("sub" if to_dir else "precious"))
        except (OSError, safefs.LinkRefused):
            pass
    before = _state(outside)
    for op, parts in ops:
        p = root.joinpath(*parts)
        try:
            if op == "write":
                safefs.write_text(p, "z", root)
            elif op == "mkdir":
                safefs.makedirs(p, root)
            elif op == "rmtree":
                safefs.rmtree(p, root)
            elif op == "replace":
                safefs.write_text(root / "src.tmp", "w", root)
                safefs.replace(root / "src.tmp", p, root)
            else:
                with safefs.open_file(p, "a+", root) as fh:
                    fh.truncate(0)
        except (OSError, safefs.LinkRefused):
            pass
    assert _state(outside) == before


def test_a_slurm_submission_refuses_a_linked_slurm_folder(tmp_path, victim):
    """.slurm -> elsewhere: nothing is written there (its job script, logs,
    frozen experiment), refused before Slurm or the lab kernel is asked."""
    from tortoiselab.host import slurm

    f, exp_dir = _tiny_folder(tmp_path)
    exp_dir.mkdir(parents=True)
    (exp_dir / ".slurm").symlink_to(victim)
    before = _state(victim)
    with pytest.raises(safefs.LinkRefused) as exc:
        slurm.submit(f, exp_dir.parent)
    _refused(exc, exp_dir / ".slurm")
    assert _state(victim) == before
