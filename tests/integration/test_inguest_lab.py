"""host/inguest.run_in_guest given a work folder it has used before (issue
37): before, the second call failed in the guest with FileExistsError
'/run/tortoise-work/.wall'. Two boots of the lab in one folder (about 3 s
each on the virtual clock); the unit side is tests/unit/test_workfolder.py."""

import os

import pytest

from tortoiselab.host.inguest import run_in_guest

pytestmark = pytest.mark.lab


def test_run_in_guest_uses_a_work_folder_again(tmp_path, lab_kernel):
    work = tmp_path / "guest"
    first = run_in_guest(["sh", "-c", "echo first; mkdir results; echo x > results/out.txt"], work,
                         clock="virtual", timeout_s=120)
    assert first["exit_code"] == 0 and first["tail"] == "first\n", first["tail"]
    readings = sorted(os.listdir(work / ".wall"))
    second = run_in_guest(["sh", "-c", "echo second; cat results/out.txt"], work, clock="virtual", timeout_s=120)
    # the second boot's own result and log; the first command's files are still there
    assert second["exit_code"] == 0 and not second["timed_out"], second["tail"]
    assert second["tail"] == "second\nx\n" and (work / "command.log").read_text() == "second\nx\n"
    assert sorted(os.listdir(work / ".wall")) == readings  # the host's clock read anew, as in a new folder
