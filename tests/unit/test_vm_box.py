"""The pure logic of the VM targets (docs/vm.md), without building or
booting anything: the local box's cache key is the hash of its inputs, and
`make experiment` builds the UML lab kernel only where the native backend
cannot run everything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO
from tortoiselab.host import hostcheck, labkernel
from tortoiselab.spec.pathspec import STOCK_ALGORITHMS

BOX = REPO / "scripts" / "vm-box.sh"


def _box(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BOX), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env})


def test_box_cache_key_is_the_hash_of_its_inputs(tmp_path):
    k1, k2 = tmp_path / "a.pub", tmp_path / "b.pub"
    k1.write_text("ssh-ed25519 AAAA one\n")
    k2.write_text("ssh-ed25519 AAAA two\n")
    h1 = _box("--hash", TORTOISE_BOX_PUBKEY=str(k1)).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{16}", h1), h1
    assert _box("--hash", TORTOISE_BOX_PUBKEY=str(k1)).stdout.strip() == h1  # stable
    assert _box("--hash", TORTOISE_BOX_PUBKEY=str(k2)).stdout.strip() != h1  # the key is an input
    # the script is an input too: a copy with one package more has another hash
    other = tmp_path / "scripts" / "vm-box.sh"
    other.parent.mkdir()
    other.write_text(BOX.read_text().replace("rsync ca-certificates", "rsync ca-certificates vim", 1))
    h_other = subprocess.run(["bash", str(other), "--hash"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "TORTOISE_BOX_PUBKEY": str(k1)}).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{16}", h_other) and h_other != h1


def test_box_lives_in_the_cache_outside_the_clone(tmp_path):
    key = tmp_path / "k.pub"
    key.write_text("ssh-ed25519 AAAA k\n")
    env = {"TORTOISE_BOX_PUBKEY": str(key), "TORTOISE_CACHE": str(tmp_path / "cache")}
    h = _box("--hash", **env).stdout.strip()
    p = _box("--path", **env)
    assert p.returncode == 0
    assert p.stdout.strip() == str(tmp_path / "cache" / "box" / f"bookworm64-{h}" / "tortoiselab-bookworm64.box")
    bad = _box("--bogus", **env)
    assert bad.returncode == 2 and "--bogus" in bad.stderr
    missing = _box("--hash", TORTOISE_BOX_PUBKEY=str(tmp_path / "none.pub"))
    assert missing.returncode != 0 and "TORTOISE_BOX_PUBKEY" in missing.stderr


def test_native_ready_asks_for_every_algorithm_the_lab_offers():
    algos = labkernel.lab_algorithms()
    ours = sorted(p.stem[len("tcp_"):] for p in (REPO / "kernel" / "modules").glob("tcp_*.c"))
    assert ours and set(ours) <= set(algos)
    assert set(STOCK_ALGORITHMS) <= set(algos)
    assert len(algos) == len(set(algos)) == len(STOCK_ALGORITHMS) + len(ours)


def test_experiment_builds_the_lab_kernel_only_where_native_cannot_run():
    mk = (REPO / "Makefile").read_text()
    deps = {m.group(1): m.group(2).split() for m in re.finditer(r"^([\w-]+):([^=\n]*)$", mk, re.M)}
    # experiment: the venv and lab-kernel side by side, in a make of their own
    recipe = mk[mk.index("\nexperiment:"):].split("\n\n", 1)[0]
    assert "kernel" not in deps["experiment"] and "-j2 $(STAMP) lab-kernel" in recipe
    assert "kernel" not in deps["probe"] and "lab-kernel" in deps["probe"]
    rule = mk[mk.index("\nlab-kernel:"):].split("\n\n", 1)[0]
    assert "tortoiselab.host.hostcheck native-ready" in rule and "$(MAKE) --no-print-directory kernel" in rule
    # the test suite boots the uml backend: it always has its kernel
    assert "kernel" in deps["test"]


def test_kernel_steps_run_before_the_venv_exists():
    """`make experiment` builds the lab kernel while pip installs the venv:
    the check before it and the build's progress run with Debian's python3
    and the source alone (the Makefile's SYSPY), so they import nothing
    beyond the standard library."""
    mk = (REPO / "Makefile").read_text()
    assert re.search(r"^SYSPY := MAKEFLAGS= PYTHONPATH=src /usr/bin/python3$", mk, re.M)
    for rule in ("\nkernel:", "\nlab-kernel:"):
        assert "$(SYSPY) -m tortoiselab.host." in mk[mk.index(rule):].split("\n\n", 1)[0]
    code = ("import sys, tortoiselab.host.hostcheck, tortoiselab.host.buildprogress; "
            "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - {'__main__'}))")
    p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "src")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["['tortoiselab']"]


def test_native_ready_command_line(capsys):
    assert hostcheck.main(["bogus"]) == 2
    rc = hostcheck.main(["native-ready"])
    out = capsys.readouterr().out
    ok, why = hostcheck.native_ready()
    assert rc == (0 if ok else 1) and why in out


def _words(text: str) -> list[str]:
    """The words of a bash array's body, double-quoted ones unquoted."""
    return [a or b for a, b in re.findall(r'"([^"]+)"|(\S+)', text)]


def test_plain_qemu_path_takes_the_vagrantfiles_steps_and_excludes():
    """scripts/vm-qemu.sh (the VM where libvirtd cannot run) repeats the
    Vagrantfile's provisioners in its order and its rsync excludes: a step
    added to one and not the other fails here."""
    vagrantfile = (REPO / "Vagrantfile").read_text()
    qemu = (REPO / "scripts" / "vm-qemu.sh").read_text()
    provisioners = [p for p in re.findall(r'config\.vm\.provision "([\w-]+)"', vagrantfile) if p != "lab-kernel"]
    steps = _words(re.search(r"^STEPS=\((.*)\)$", qemu, re.M).group(1))
    assert steps == provisioners == ["bootstrap", "setup", "kernel", "reboot", "verify"]
    excludes = re.findall(r'"([^"]+)"', re.search(r"rsync__exclude: \[(.*?)\]", vagrantfile, re.S).group(1))
    assert _words(re.search(r"^EXCLUDES=\((.*)\)$", qemu, re.M).group(1)) == excludes
    for step in steps:  # each step has its command
        assert re.search(rf"^\s+{step}\)", qemu, re.M), step


def test_plain_qemu_path_refuses_bad_settings_before_anything_starts():
    for env, msg in [({"TORTOISE_VM_DRIVER": "xen"}, "TORTOISE_VM_DRIVER must be kvm or qemu, not 'xen'"),
                     ({"TORTOISE_VM_MEMORY": "512"}, "TORTOISE_VM_MEMORY: at least 2048 MiB, not '512'"),
                     ({"TORTOISE_VM_CPUS": "two"}, "TORTOISE_VM_CPUS must be a whole number")]:
        p = subprocess.run(["bash", str(REPO / "scripts" / "vm-qemu.sh"), "up"], capture_output=True, text=True,
                           timeout=30, env={**os.environ, **env})
        assert p.returncode == 1 and msg in p.stderr, p.stderr
    p = subprocess.run(["bash", str(REPO / "scripts" / "vm-qemu.sh"), "provision", "nope"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 1 and "one of: bootstrap setup kernel reboot verify" in p.stderr


def test_plain_qemu_path_names_its_forwarded_ports(tmp_path):
    """`scripts/vm-qemu.sh port 8888` is `vagrant port --guest 8888` of the
    plain qemu path: the port `up` took (scripts/vm-jupyter.sh reaches
    Jupyter through it); with no VM up, or for a port it does not forward,
    it says so."""
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "vm-qemu.sh"
    script.write_text((REPO / "scripts" / "vm-qemu.sh").read_text())
    (tmp_path / "scripts" / "procid.sh").write_text((REPO / "scripts" / "procid.sh").read_text())

    def port(guest: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(script), "port", guest], capture_output=True, text=True, timeout=30)

    p = port("8888")
    assert p.returncode == 1 and "no VM of this clone is up" in p.stderr, p.stderr
    state = tmp_path / ".vagrant" / "qemu"
    state.mkdir(parents=True)
    (state / "jupyter-port").write_text("8899\n")
    (state / "ssh-port").write_text("40022\n")
    assert port("8888").stdout.strip() == "8899" and port("22").stdout.strip() == "40022"
    p = port("80")
    assert p.returncode == 1 and "port: 22 or 8888" in p.stderr


def test_vm_jupyter_check_names_its_paths():
    p = subprocess.run(["bash", str(REPO / "scripts" / "vm-jupyter.sh"), "virtualbox"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "usage: scripts/vm-jupyter.sh libvirt|qemu" in p.stderr
    # make vm-test runs it on the path it took, after the results are out
    test = (REPO / "scripts" / "vm-test.sh").read_text()
    assert test.index('step --keep-going jupyter bash scripts/vm-jupyter.sh "$path_taken"') > test.index("step results-out")
    # a failed make experiment fails the test but does not hide the steps after it
    assert "step --keep-going experiment" in test and 'fail "step experiment' not in test[:test.index("step results-out")]


def _fake_tunnel(tmp_path, port: int = 8888):
    """A process whose command line is vagrant-libvirt's tunnel (argv[0]
    ssh, a -L forward of port): python3 under the name ssh, as `ssh` on the
    PATH given to the script (a link to python3), so a restart with the same
    command line runs it again."""
    import signal
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ssh").symlink_to(sys.executable)  # not a shim (pyenv's rewrites argv[0])
    argv = ["ssh", "-c", "import time; time.sleep(120)", "-n", "-L", f"*:{port}:192.168.121.7:8888", "-N",
            "192.168.121.7"]
    p = subprocess.Popen(argv, executable=sys.executable, start_new_session=True)
    machine = tmp_path / ".vagrant" / "machines" / "default" / "libvirt"
    (machine / "pids").mkdir(parents=True)
    (machine / "logs").mkdir()
    (machine / "pids" / f"ssh_{port}.pid").write_text(str(p.pid))
    (machine / "logs" / f"ssh-forwarding-*_{port}-192.168.121.7_8888.log").write_text("")
    return p, argv, machine, signal


def test_vm_forward_restarts_a_recorded_tunnel_with_its_own_command_line(tmp_path):
    """scripts/vm-forward.sh (the Vagrantfile's trigger after up and
    provision, issue 41): the tunnel vagrant-libvirt recorded is ended and
    started again with the same command line, its new pid recorded where
    halt and destroy look; a pid file naming anything but that ssh tunnel is
    left alone."""
    p, argv, machine, signal = _fake_tunnel(tmp_path)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    new = None
    try:
        r = subprocess.run(["bash", str(REPO / "scripts" / "vm-forward.sh"), str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert p.wait(timeout=10) is not None  # the old tunnel ended
        new = int((machine / "pids" / "ssh_8888.pid").read_text())
        assert new != p.pid and "started again" in r.stdout
        assert Path(f"/proc/{new}/cmdline").read_bytes().split(b"\0")[:-1] == [a.encode() for a in argv]
    finally:
        for pid in (p.pid, new):
            if pid and Path(f"/proc/{pid}").exists() and pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    p.wait(timeout=10)


def test_vm_forward_starts_a_tunnel_that_exited_from_its_kept_command_line(tmp_path):
    """The provisioning reboot can end the tunnel (its connection closed as
    the VM shut down): `make vm-test` on libvirt found no forward on 8888
    after it (2026-11-27, run 10 of docs/vm.md). The command line kept when
    the tunnel was last seen running starts it again; without one, nothing
    is started and the message says how."""
    p, argv, machine, signal = _fake_tunnel(tmp_path)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    script = ["bash", str(REPO / "scripts" / "vm-forward.sh"), str(tmp_path)]
    pids = [p.pid]
    try:
        assert subprocess.run(script, env=env, capture_output=True, text=True, timeout=60).returncode == 0
        first = int((machine / "pids" / "ssh_8888.pid").read_text())
        pids.append(first)
        os.kill(first, signal.SIGKILL)  # the reboot: the tunnel exits
        _wait_gone(first)
        r = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "had exited; its command line from" in r.stdout, r.stdout + r.stderr
        second = int((machine / "pids" / "ssh_8888.pid").read_text())
        pids.append(second)
        assert second not in (p.pid, first)
        assert Path(f"/proc/{second}/cmdline").read_bytes().split(b"\0")[:-1] == [a.encode() for a in argv]
        # no kept command line: nothing started, the way out named
        (tmp_path / ".vagrant" / "tortoiselab" / "forward-default-8888.argv").unlink()
        os.kill(second, signal.SIGKILL)
        _wait_gone(second)
        r = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "vagrant reload starts it again" in r.stdout, r.stdout + r.stderr
        assert int((machine / "pids" / "ssh_8888.pid").read_text()) == second
    finally:
        for pid in pids:  # only a process still running the fake tunnel's command line (a pid may be reused)
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1] == [a.encode() for a in argv]:
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass
    p.wait(timeout=10)


def _wait_gone(pid: int) -> None:
    """Until the process has exited (gone, or a zombie not yet reaped), at most 5 s."""
    for _ in range(100):
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return
        time.sleep(0.05)


def test_vm_forward_leaves_a_process_that_is_not_the_tunnel_alone(tmp_path):
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        machine = tmp_path / ".vagrant" / "machines" / "default" / "libvirt"
        (machine / "pids").mkdir(parents=True)
        (machine / "pids" / "ssh_8888.pid").write_text(str(other.pid))
        r = subprocess.run(["bash", str(REPO / "scripts" / "vm-forward.sh"), str(tmp_path)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and "is not the recorded ssh tunnel" in r.stdout, r.stdout + r.stderr
        assert other.poll() is None  # not signalled
        assert (machine / "pids" / "ssh_8888.pid").read_text() == str(other.pid)
    finally:
        other.kill()
        other.wait()
    # no libvirt VM at all: nothing to do
    assert subprocess.run(["bash", str(REPO / "scripts" / "vm-forward.sh"), str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60).returncode == 0
