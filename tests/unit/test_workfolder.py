"""A lab's work folder used again (host/workfolder.py, issue 37): before a
boot, what an earlier boot left is removed, never through a link, and the
caller's own files stay; a folder whose lab still runs is refused. On real
files and a real lab guard process (no lab boot); the boot twice in one
folder is tests/integration/test_native_in_guest.py
::test_run_in_guest_uses_a_work_folder_again."""

from __future__ import annotations

import os
import subprocess

import pytest

from tortoiselab.host import backends, procid, workfolder

# what one boot of run_in_guest left (`sh -c 'echo hi; mkdir -p results; echo x > results/out.txt'`,
# listed after the boot): the lab's files, and the command's own results/
USED = {".wall/1": "", ".wall/2": "", "ro_paths": "", "commands.log": "$ sh -c ...\n",
        "uml_userspace": "ptrace\tdefault\n", "request.json": "{}", "result.json": '{"ok": true, "task": {}}',
        "boot.json": "{}", "console.log": "tortoise-guest: task exited with 0\n", "uml.pgid": "4242",
        "command.log": "hi\n", "results/out.txt": "x\n", "e.yaml": "name: e\n"}


def _make(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _gone_record() -> dict:
    """The record of a process that has ended (as a finished boot's uml.proc.json)."""
    p = subprocess.Popen(["true"])
    rec = procid.record(p.pid)
    p.wait()
    return rec


def test_a_folder_a_boot_used_is_made_ready_and_the_callers_files_stay(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    _make(work, USED)
    (work / "uml.proc.json").write_text(procid.dumps(_gone_record()))
    removed = workfolder.prepare(work)
    assert sorted(removed) == sorted({".wall", "ro_paths", "commands.log", "uml_userspace", "request.json",
                                      "result.json", "boot.json", "console.log", "uml.pgid", "command.log",
                                      "uml.proc.json"})
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == ["e.yaml", "results",
                                                                              "results/out.txt"]
    assert (work / "results" / "out.txt").read_text() == "x\n"
    assert workfolder.prepare(work) == []  # nothing left of the lab's
    assert workfolder.prepare(tmp_path / "new" / "w") == [] and (tmp_path / "new" / "w").is_dir()


def test_links_where_the_lab_writes_are_refused_and_never_followed(tmp_path):
    """A copied or edited folder (docs/faults.md): result.json -> a victim file,
    .wall -> a victim folder. Removing through them would delete the victims'
    contents; writing request.json through one would overwrite a file outside."""
    work, victim = tmp_path / "w", tmp_path / "victim"
    work.mkdir()
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    _make(work, {"console.log": "old\n"})
    os.symlink(victim / "keep.txt", work / "result.json")
    os.symlink(victim, work / ".wall")
    with pytest.raises(workfolder.WorkFolderError) as e:
        workfolder.prepare(work)
    msg = str(e.value)
    assert msg.startswith(f"the work folder {work} holds {work / '.wall'} (a link to {victim}), "
                          f"{work / 'result.json'} (a link to {victim / 'keep.txt'}) where the lab writes")
    assert msg.endswith(f"remove them (rm {work / '.wall'} {work / 'result.json'}) or give another work folder")
    assert (victim / "keep.txt").read_text() == "mine\n" and os.listdir(victim) == ["keep.txt"]
    assert (work / "console.log").read_text() == "old\n"  # refused before anything is removed
    assert os.path.islink(work / "result.json") and os.path.islink(work / ".wall")


def test_a_folder_whose_lab_still_runs_is_refused(tmp_path):
    """A lab guard (the leader of a lab's process group, tools/lab_guard.py)
    whose home is the folder and whose record the folder holds: a second
    boot there would share it with a running lab."""
    work = tmp_path / "w"
    work.mkdir()
    p = subprocess.Popen(backends.guarded(["sleep", "30"], 30, 0), stdin=subprocess.PIPE, start_new_session=True,
                         env={**os.environ, "HOME": str(work)})
    try:
        (work / "uml.proc.json").write_text(procid.dumps(procid.record(p.pid)))
        (work / "result.json").write_text("{}")
        with pytest.raises(workfolder.WorkFolderError, match=rf"the work folder {work} is in use: a lab started "
                                                             rf"there still runs \(process group {p.pid}\)"):
            workfolder.prepare(work)
        assert (work / "result.json").exists()
        other = tmp_path / "other"  # the same record in a folder that is not the lab's home proves nothing
        other.mkdir()
        (other / "uml.proc.json").write_text(procid.dumps(procid.record(p.pid)))
        assert workfolder.live_lab(other) is None and workfolder.prepare(other) == ["uml.proc.json"]
    finally:
        procid.kill_group(p, quiet=True)
    assert workfolder.live_lab(work) is None
    assert sorted(workfolder.prepare(work)) == ["result.json", "uml.proc.json"]
