"""What the runner refuses before it creates anything: a results path the
lab guest cannot carry, an object the site does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import experiment_yaml
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.checks import GUEST_TMPFS, check_manifest_urls
from tortoiselab.host.runner import run_experiment
from tortoiselab.spec.experiment import expand, load

SITE = Path(__file__).resolve().parents[1] / "data" / "runs" / "coalescing@ci" / ".lab" / "site"


def _exp(tmp_path: Path, client: dict) -> Path:
    f = tmp_path / "e.yaml"
    f.write_text(experiment_yaml("unit", {"name": "checks", "client": client, "sweep.server.cc": ["cubic", "reno"]}))
    return f


def test_an_object_the_site_does_not_have_is_refused_before_anything(tmp_path):
    """Seen: objects/10485760.bin (the sizes are decimal: 10000000) ran 12
    runs stored ok with a throughput of a few bytes per second."""
    f = _exp(tmp_path, {"url": "objects/10485760.bin", "loader": "h2load"})
    results = tmp_path / "results"
    with pytest.raises(RunnerError, match=r"client.url: the lab's site has no objects/10485760.bin; its objects are "
                                          r"objects/500.bin, .*objects/10000000.bin \(sizes in bytes, decimal\)"):
        run_experiment(f, results, backend="uml")
    assert not results.exists()


def test_a_results_path_with_a_space_is_refused_before_anything(tmp_path):
    f = _exp(tmp_path, {"page": "tiny.html"})
    results = tmp_path / "with space"
    with pytest.raises(RunnerError, match=r"results: the path .*with space/checks.* contains ':' or a space"):
        run_experiment(f, results, backend="uml")
    assert not results.exists()


@pytest.mark.parametrize("url,ok", [("objects/1000000.bin", True), ("feed.html", True),
                                    ("img/nothing-here.png", False), ("css/css-00-8010df33cf.css", False)])
def test_other_urls_are_checked_against_the_sites_manifest(tmp_path, url, ok):
    runs = expand(load(_exp(tmp_path, {"url": url})))
    if ok:
        check_manifest_urls(runs, SITE)
    else:  # the css is on static, not on www where client.url points
        with pytest.raises(RunnerError, match=f"client.url: the lab's site has no {url}"):
            check_manifest_urls(runs, SITE)


def test_a_results_folder_the_web_server_cannot_enter_is_refused(tmp_path):
    """Seen: results under a 0700 folder outside /tmp gave 403 Forbidden for
    every page (Apache runs as www-data); under /tmp the guest remounts it."""
    if any(Path.cwd().is_relative_to(d) for d in GUEST_TMPFS):
        pytest.skip(f"the clone is under one of {[str(d) for d in GUEST_TMPFS]}, which the guest mounts anew "
                    "for the lab's users: no folder of it can stand between them and the site")
    f = _exp(tmp_path, {"page": "tiny.html"})
    home = Path.cwd() / ".pytest-private-home"
    home.mkdir(mode=0o700, exist_ok=True)
    try:
        home.chmod(0o700)
        with pytest.raises(RunnerError, match=r"results: the lab's web server runs as www-data and cannot enter "
                                              r".*\.pytest-private-home \(mode 0700"):
            run_experiment(f, home / "results", backend="uml")
        assert not (home / "results").exists()
    finally:
        home.rmdir()
