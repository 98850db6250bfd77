"""host/inguest.py: a command in the lab guest, as a typed request (no lab)."""

import sys

from tortoiselab.host import backends, inguest
from tortoiselab.spec.requests import CommandRequest


def test_run_in_guest_sends_a_command_request_and_returns_the_task(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(backends, "choose", lambda backend, clock, algos: backends.BackendInfo(backend, clock, "/k"))

    def run_task(info, req, work, timeout_s):
        seen.update(info=info, req=req, work=work, timeout_s=timeout_s)
        return {"ok": True, "task": {"exit_code": 0, "timed_out": False}}

    monkeypatch.setattr(backends, "run_task", run_task)
    out = inguest.run_in_guest(inguest.tortoise_argv("run", "e.yaml"), tmp_path / "w", timeout_s=60, seed=5)
    assert out == {"exit_code": 0, "timed_out": False}
    assert seen["info"] == backends.BackendInfo("uml", "real", "/k")
    assert seen["req"] == CommandRequest(argv=[sys.executable, "-m", "tortoiselab.cli", "run", "e.yaml"],
                                         timeout_s=60, seed=5)
    assert seen["timeout_s"] == 60 + inguest.BOOT_SLACK_S
    assert seen["work"] == (tmp_path / "w").resolve() and (tmp_path / "w").stat().st_mode & 0o777 == 0o755
