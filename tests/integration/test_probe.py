"""The lab foundation end to end, inside the UML lab kernel on the virtual
clock: the default path is emulated as configured, every algorithm can be
selected, an unprivileged user can run it, and nothing is left behind."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, TORTOISE, group_alive, host_state

pytestmark = pytest.mark.lab


def probe(work: Path, *args: str, timeout: float = 600, **kw) -> tuple[subprocess.CompletedProcess, dict | None]:
    p = subprocess.run([*TORTOISE, "probe", "--backend", "uml", "--clock", "virtual", "--json",
                        "--work", str(work), *args], capture_output=True, text=True, timeout=timeout, **kw)
    rep = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p, rep


def test_default_path_is_emulated_as_configured(tmp_path, lab_kernel):
    before = host_state()
    p, rep = probe(tmp_path / "w")
    assert rep is not None, p.stderr
    table = {c["quantity"]: c for c in rep["checks"]}
    for c in rep["checks"]:  # the figures, for the log
        print(f"{c['quantity']:<16} configured {c['configured']:>8} measured {c['measured']:>9} "
              f"accepted [{c['low']}, {c['high']}] {c['note']}")
    assert (rep["backend"], rep["clock"], rep["switch"]) == ("uml", "virtual", "ovs")
    # the kernel the lab booted is the one built (kernel/build-uml.sh records its release beside it)
    assert rep["kernel_release"] == (lab_kernel.parent / "release").read_text().strip()
    # RTT within max(0.5 ms, 1 %) of configured + serialization
    rtt = table["base RTT"]
    assert abs(rtt["measured"] - rtt["expected"]) <= max(0.5, 0.01 * 200)
    # rate within 3 %
    assert abs(table["bottleneck rate"]["measured"] - 10.0) <= 0.3
    # loss inside its 95 % interval, each direction
    for d in ("loss down", "loss up"):
        assert table[d]["low"] <= 1.0 <= table[d]["high"], table[d]
    assert rep["ok"] and p.returncode == 0
    assert host_state() == before
    assert not (tmp_path / "w" / "uml").exists()
    assert not group_alive(int((tmp_path / "w" / "uml.pgid").read_text()))


def test_loss_draws_follow_the_seed(tmp_path, lab_kernel):
    """netem's PRNG is seeded per direction from the run's seed: the same
    seed loses the same probes, another seed other ones."""
    args = ["--bulk-seconds", "2.5", "--loss-probes", "1500", "--rtt-ms", "40", "--loss-pct", "3"]
    lost = {}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        extra = ["--cc", "reno_beta", "--module-param", "reno_beta.beta=0.8"] if name == "c" else []
        p, rep = probe(tmp_path / name, *args, "--seed", str(seed), *extra)
        assert rep is not None, p.stderr
        if extra:  # module parameters are set per run and recorded with it
            assert rep["modules"]["reno_beta"] == {"beta": "0.800"}
            assert rep["cc"] == "reno_beta"
        task = json.loads((tmp_path / name / "result.json").read_text())["task"]
        lost[name] = (task["loss_down"]["lost_seqs"], task["loss_up"]["lost_seqs"])
        assert task["seeds"]["netem_down"] != task["seeds"]["netem_up"]
    assert lost["a"] == lost["b"]
    assert lost["a"][0] and lost["a"][1]
    assert lost["a"] != lost["c"]


def test_every_algorithm_is_selectable_on_the_server(tmp_path, lab_kernel):
    # its work folder (kept for a look) goes under this test's own temporary folder
    p = subprocess.run([*TORTOISE, "cc-check", "--backend", "uml", "--clock", "virtual"],
                       capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(tmp_path)})
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines()[2:] if ln.strip()]
    assert len(rows) >= 17  # the 17 stock algorithms of 6.12
    for row in rows:
        assert row[-1] == "yes", row
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith("tortoise-cc-")]


def test_interrupt_leaves_nothing_behind(tmp_path, lab_kernel):
    before = host_state()
    work = tmp_path / "w"
    proc = subprocess.Popen([*TORTOISE, "probe", "--backend", "uml", "--clock", "virtual", "--work", str(work)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # interrupt once the guest is up and the lab's commands are running
    while time.monotonic() < deadline and not (work / "commands.log").exists():
        time.sleep(0.2)
    assert (work / "commands.log").exists(), "the lab never started"
    pgid = int((work / "uml.pgid").read_text())
    assert group_alive(pgid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not group_alive(pgid)
    assert not (work / "uml").exists()
    assert host_state() == before


def _unprivileged_user() -> tuple[int, int] | None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    return 65534, 65534  # nobody


def test_probe_as_an_unprivileged_user(lab_kernel):
    ids = _unprivileged_user()
    if ids is None:
        pytest.skip("needs root to switch to an unprivileged account (and setpriv)")
    uid, gid = ids
    as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    # the project and its venv must be readable by that account
    if subprocess.run([*as_user, TORTOISE[0], "-c", "import tortoiselab"], cwd="/",
                      capture_output=True).returncode != 0:
        pytest.skip(f"this clone ({REPO}) is not readable by uid {uid}")
    base = Path(tempfile.mkdtemp(prefix="tortoise-nonroot-"))
    try:
        base.chmod(0o755)
        kdir = base / "kernel"
        kdir.mkdir()
        shutil.copy2(lab_kernel, kdir / "linux")
        shutil.copy2(lab_kernel.parent / "config", kdir / "config")
        work = base / "work"
        work.mkdir()
        os.chown(work, uid, gid)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TORTOISE_KERNEL": str(kdir / "linux"),
               "HOME": str(work)}
        p = subprocess.run([*as_user, *TORTOISE, "probe", "--backend", "auto", "--json", "--work",
                            str(work / "run"), "--bulk-seconds", "4", "--loss-probes", "2000"],
                           capture_output=True, text=True, timeout=600, env=env, cwd="/")
        assert p.stdout.strip().startswith("{"), p.stderr
        rep = json.loads(p.stdout)
        assert (rep["backend"], rep["clock"]) == ("uml", "virtual")
        assert rep["ok"], rep["checks"]
        assert (work / "run" / "result.json").stat().st_uid == uid
    finally:
        shutil.rmtree(base, ignore_errors=True)
