import os
import sys

import pytest

from tortoiselab.host import backends as B
from tortoiselab.host import hostcheck as H
from tortoiselab.host import labkernel as K
from tortoiselab.host import umlcmd as U
from tortoiselab.host import guestpaths as G
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import CcCheckRequest, read_request


def test_uml_argv_virtual():
    argv = U.uml_argv("/k/linux", "virtual", "tl-1")
    # the kernel runs with the host's getrandom failing for it (docs/determinism.md)
    assert argv[:4] == [sys.executable, "-S", str(U.NO_HOST_ENTROPY), "/k/linux"]
    assert "root=/dev/root" in argv and "rootfstype=hostfs" in argv and "rootflags=/" in argv
    assert "ro" in argv  # the host tree is read-only in the guest
    assert f"init={U.GUEST_INIT}" in argv
    # nothing that differs between two boots of a run is on the kernel's command
    # line (it seeds the random pool): the work folder is the process's cwd (not
    # an argument), and UML's control dir its default $HOME/.uml with HOME = the
    # work folder
    assert not [x for x in argv if x.startswith(("uml_dir=", "TL_WORK="))]
    assert argv[-1] == "time-travel=inf-cpu"
    # the guest's wall clock starts at a fixed instant (docs/determinism.md), in ns
    assert f"time-travel-start={U.VIRTUAL_EPOCH_S * 10**9}" in argv and U.VIRTUAL_EPOCH_S == 1893456000
    real = U.uml_argv("/k/linux", "real", "tl-1")
    assert not [x for x in real if x.startswith("time-travel")]


def test_guest_work_paths_map_back_to_the_host(tmp_path):
    """The uml guest sees the run's work folder at one fixed path in every
    boot (docs/determinism.md); the paths in its result come back as the
    host's, and nothing else changes."""
    g = G.GUEST_WORK
    res = {"ok": True, "task": {"loads": [{"pcap": f"{g}/load-000/server.pcap", "har": None, "n": 3,
                                           "names": ["/run/tortoise-web/x", f"{g}x/y", g]}]}}
    out = G.host_paths(res, tmp_path, "uml")
    ld = out["task"]["loads"][0]
    assert ld["pcap"] == f"{tmp_path}/load-000/server.pcap" and ld["har"] is None and ld["n"] == 3
    assert ld["names"] == ["/run/tortoise-web/x", f"{g}x/y", str(tmp_path)]
    assert f"W={g}\n" in U.GUEST_INIT.read_text()  # the path init.sh mounts it at


def test_a_native_result_keeps_its_paths_even_under_the_guest_work_folder(tmp_path):
    """Native inside a lab guest (tests/integration/test_native_in_guest.py)
    writes under GUEST_WORK: its paths are already the right ones."""
    res = {"pcap": f"{G.GUEST_WORK}/results/e/.r.tmp-boot/lab/load-000/server.pcap"}
    assert G.host_paths(res, tmp_path, "native") == res


def test_uml_argv_seccomp_only_when_asked():
    assert "seccomp=on" not in U.uml_argv("/k/linux", "virtual", "tl-1")
    argv = U.uml_argv("/k/linux", "virtual", "tl-1", userspace="seccomp")
    # `on`, not `auto`: the kernel either runs seccomp or stops, so the mode is known
    assert argv[-1] == "seccomp=on" and "time-travel=inf-cpu" in argv


def test_uml_userspace_follows_the_kernel_and_the_host(tmp_path, monkeypatch):
    monkeypatch.delenv("TORTOISE_UML_USERSPACE", raising=False)
    k612, k73 = tmp_path / "linux-612", tmp_path / "linux-73"
    k612.write_bytes(b"\0" * 100 + b"time-travel=inf-cpu\0")
    k73.write_bytes(b"\0" * 100 + b"seccomp=<on/auto/off>\n    Configure whether\0")
    assert U.uml_userspace(str(k612))[0] == "ptrace"
    assert U.uml_userspace(str(k73)) == ("seccomp", "the kernel offers it")
    monkeypatch.setenv("TORTOISE_UML_USERSPACE", "ptrace")
    assert U.uml_userspace(str(k73))[0] == "ptrace"
    monkeypatch.setenv("TORTOISE_UML_USERSPACE", "seccomp")
    with pytest.raises(B.LabError, match="no seccomp mode"):
        U.uml_userspace(str(k612))
    # a refusal seen once: ptrace from then on, and it says why
    monkeypatch.delenv("TORTOISE_UML_USERSPACE")
    log = tmp_path / "console.log"
    log.write_text("Checking that seccomp filters can be installed...missing\n"
                   "SECCOMP userspace requested but not functional!\n")
    why = U.seccomp_refusal(log)
    assert why is not None and "missing" in why
    U.record_seccomp_refusal(str(k73), why)  # recorded beside the kernel: later boots and processes see it
    assert U.seccomp_refused(str(k73)) == why
    mode, reason = U.uml_userspace(str(k73))
    assert mode == "ptrace" and "refused" in reason and "missing" in reason
    log.write_text("Linux version 7.3.4\n")
    assert U.seccomp_refusal(log) is None


def test_kernel_algorithms_from_config_and_our_modules(tmp_path, monkeypatch):
    monkeypatch.delenv("TORTOISE_MODULES", raising=False)
    (tmp_path / "config").write_text("CONFIG_TCP_CONG_CUBIC=y\nCONFIG_TCP_CONG_HSTCP=y\n"
                                     "# CONFIG_TCP_CONG_BBR is not set\nCONFIG_TCP_CONG_ADVANCED=y\n")
    assert K.kernel_algorithms(tmp_path / "linux") == ["reno", "cubic", "highspeed"]
    mods = tmp_path / "modules-abc"
    mods.mkdir()
    (mods / "tcp_reno_beta.ko").write_text("")
    (mods / "BUILD_OK").write_text("")
    assert K.modules_path(tmp_path / "linux") == mods
    assert K.kernel_algorithms(tmp_path / "linux") == ["reno", "cubic", "highspeed", "reno_beta"]


def test_choose_refuses_bad_combinations(monkeypatch):
    with pytest.raises(B.LabError, match="backend: unknown backend 'vm'"):
        B.choose("vm", "auto", ["cubic"])
    with pytest.raises(B.LabError, match="clock: unknown clock"):
        B.choose("uml", "fast", ["cubic"])
    with pytest.raises(B.LabError, match="virtual clock needs the uml backend"):
        B.choose("native", "virtual", ["cubic"])


def test_auto_falls_back_to_uml_where_the_host_cannot_emulate(monkeypatch, tmp_path):
    kernel = tmp_path / "linux"
    kernel.write_text("")
    monkeypatch.setenv("TORTOISE_KERNEL", str(kernel))
    monkeypatch.setattr(B, "host_can_emulate", lambda algos: (False, "no netem"))
    info = B.choose("auto", "auto", ["hybla"])
    assert (info.backend, info.clock, info.kernel) == ("uml", "virtual", str(kernel))
    assert B.choose("auto", "real", ["hybla"]).clock == "real"
    monkeypatch.setattr(B, "host_can_emulate", lambda algos: (True, "ok"))
    assert B.choose("auto", "auto", ["hybla"]).backend == "native"
    # the virtual clock exists only in the lab kernel
    assert B.choose("auto", "virtual", ["hybla"]).backend == "uml"


def test_missing_kernel_says_make_kernel(monkeypatch, tmp_path):
    monkeypatch.setenv("TORTOISE_KERNEL", str(tmp_path / "nope"))
    monkeypatch.setattr(B, "host_can_emulate", lambda algos: (False, "x"))
    with pytest.raises(B.LabError, match="make kernel"):
        B.choose("auto", "auto", ["cubic"])


@pytest.mark.skipif(os.geteuid() == 0, reason="checks the unprivileged case")
def test_native_needs_root():
    assert H.host_can_emulate(["cubic"]) == (False, "not root")


def _fake_host(monkeypatch, cfg: str, installed: set[str]) -> None:
    monkeypatch.setattr(H.os, "geteuid", lambda: 0)
    monkeypatch.setattr(H, "host_kernel_config", lambda: cfg)
    monkeypatch.setattr(H, "installed_module", lambda name: name in installed)


def test_native_accepts_our_modules_that_dkms_installed(monkeypatch):
    # the VM's kernel: Debian's config names no cubic_plus; DKMS put the module in updates/
    _fake_host(monkeypatch, "CONFIG_NET_SCH_NETEM=y\n", {"tcp_cubic_plus"})
    assert H.host_can_emulate(["cubic", "cubic_plus"])[0]
    ok, why = H.host_can_emulate(["cubic", "reno_beta"])
    assert not ok and why == "host kernel lacks reno_beta"


def test_native_refuses_a_host_without_netem(monkeypatch):
    _fake_host(monkeypatch, "CONFIG_TCP_CONG_CUBIC=y\n", set())
    assert H.host_can_emulate(["cubic"]) == (False, "host kernel has no netem (CONFIG_NET_SCH_NETEM)")


def test_run_task_writes_the_typed_request_with_where_it_runs(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(B, "_run_native", lambda work, timeout_s, stop=None: seen.setdefault("native", (work, timeout_s)))
    monkeypatch.setattr(B, "_run_uml", lambda info, req, work, timeout_s, stop=None: seen.setdefault("uml", req))
    monkeypatch.setattr(B, "modules_path", lambda kernel: tmp_path / "modules-x")
    req = CcCheckRequest(path=PathSpec(rtt_ms=40), algorithms=["cubic"], seed=5)
    B.run_task(B.BackendInfo("native", "real"), req, tmp_path / "n")
    assert seen["native"] == (tmp_path / "n", B.TASK_TIMEOUT_S)
    native = read_request((tmp_path / "n" / "request.json").read_text())
    assert native == req.model_copy(update={"backend": "native", "clock": "real", "private_ovs": False})
    assert native.modules_dir is None  # the host's kernel: its own modules
    B.run_task(B.BackendInfo("uml", "virtual", "/k/linux"), req, tmp_path / "u")
    uml = read_request((tmp_path / "u" / "request.json").read_text())
    assert (uml.backend, uml.clock, uml.private_ovs, uml.modules_dir) == ("uml", "virtual", True,
                                                                          str(tmp_path / "modules-x"))
    assert seen["uml"] == uml and (uml.seed, uml.algorithms) == (5, ["cubic"])
    assert req.backend is None  # the caller's request is left as it was


def test_our_modules_are_looked_up_once_per_invocation_not_per_boot(tmp_path, monkeypatch):
    """choose() asks kernel/build-uml.sh for our modules' folder once (a
    bash run of ~20 ms); each lab boot of the invocation reuses it."""
    kernel = tmp_path / "linux"
    kernel.write_text("")
    monkeypatch.setenv("TORTOISE_KERNEL", str(kernel))
    monkeypatch.setattr(B, "host_can_emulate", lambda algos: (False, "no netem"))
    asked = []
    monkeypatch.setattr(B, "modules_path", lambda k: asked.append(k) or tmp_path / "modules-x")
    monkeypatch.setattr(B, "_run_uml", lambda info, req, work, timeout_s, stop=None: req)
    info = B.choose("uml", "virtual", ["cubic"])
    assert asked == [kernel] and B.lab_modules(info) == tmp_path / "modules-x"
    req = CcCheckRequest(path=PathSpec(rtt_ms=40), algorithms=["cubic"], seed=5)
    for i in range(3):
        assert B.run_task(info, req, tmp_path / f"u{i}").modules_dir == str(tmp_path / "modules-x")
    assert asked == [kernel]
    monkeypatch.setattr(B, "modules_path", lambda k: None)  # none built: known too, not asked again
    none = B.choose("uml", "virtual", ["cubic"])
    assert none.modules_known and B.lab_modules(none) is None
    assert B.run_task(none, req, tmp_path / "n").modules_dir is None
