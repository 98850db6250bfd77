"""host/buildprogress.py: the lab kernel build's progress line (files
compiled of the total, time left), read from a build tree in a scratch
cache, and the wrapper run around a real command that makes such a tree."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

from tortoiselab.host import buildprogress as bp


def test_count_objects_counts_o_files_and_does_not_follow_links(tmp_path):
    tree = tmp_path / "linux-source-7.3"
    (tree / "net" / "ipv4").mkdir(parents=True)
    for name in ("tcp.o", "tcp_cubic.o", "tcp.c", "built-in.a", "tcp.o.cmd"):
        (tree / "net" / "ipv4" / name).write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.o").write_text("")
    os.symlink(elsewhere, tree / "link")
    assert bp.count_objects(tree) == 2


def test_status_gives_files_of_the_total_and_the_time_left():
    assert bp.status(500, 2000, 120) == \
        "lab kernel: 500 of about 2000 files compiled (25 %), 2 min 00 s so far, about 6 min 00 s left"


def test_clock_reads_as_people_read_durations():
    assert [bp.clock(s) for s in (45, 185, 6461)] == ["45 s", "3 min 05 s", "1 h 47 min"]


def test_status_guesses_no_time_before_a_few_files_nor_without_a_total():
    assert bp.status(10, 2000, 30).endswith("30 s so far")
    assert bp.status(10, None, 30) == "lab kernel: 10 files compiled, 30 s so far"
    assert bp.left_s(10, 2000, 30) is None and bp.left_s(1000, 2000, 30) == 30


def test_status_past_the_expected_total_says_so():
    assert bp.status(2100, 2000, 600) == \
        "lab kernel: 2100 files compiled (about 2000 expected), 10 min 00 s so far, linking"


def test_expected_total_prefers_this_caches_last_build(tmp_path, monkeypatch):
    monkeypatch.setitem(bp.SHIPPED_TOTALS, "7.3", 2000)
    assert bp.expected_total(tmp_path, "7.3") == 2000
    assert bp.expected_total(tmp_path, "6.12") is None
    (tmp_path / "objects-7.3").write_text("1999\n")
    assert bp.expected_total(tmp_path, "7.3") == 1999
    (tmp_path / "objects-7.3").write_text("garbage")
    assert bp.expected_total(tmp_path, "7.3") == 2000


def test_new_tree_ignores_builds_that_were_there_before(tmp_path):
    (tmp_path / "build-old.AAAA" / "linux-source-7.3").mkdir(parents=True)
    before = {d.name for d in tmp_path.iterdir()}
    assert bp.new_tree(tmp_path, before) is None
    (tmp_path / "build-new.BBBB" / "linux-source-7.3").mkdir(parents=True)
    assert bp.new_tree(tmp_path, before) == tmp_path / "build-new.BBBB" / "linux-source-7.3"


def test_watcher_prints_plain_lines_and_keeps_the_commands_own(tmp_path):
    out = io.StringIO()
    w = bp.Watcher(tmp_path, "7.3", tty=False, out=out)
    w.say("lab kernel: building with 2 jobs")
    w.show(bp.status(3, 10, 5))
    assert out.getvalue().splitlines() == ["lab kernel: building with 2 jobs",
                                           "lab kernel: 3 of about 10 files compiled (30 %), 5 s so far, "
                                           "about 12 s left"]


def test_wrapper_reports_a_real_builds_files_and_records_its_total(tmp_path, monkeypatch):
    """A command that extracts a tree into the cache and makes object files
    over a few seconds: the wrapper passes its lines through, reports the
    count as it grows from the command's "building" line on, records the
    most it saw for the next build, and returns the command's status."""
    build = textwrap.dedent(f"""
        import os, sys, time
        tree = os.path.join({str(tmp_path)!r}, "kernel", "build-abc.XYZ", "linux-source-7.3")
        os.makedirs(tree)
        print("lab kernel: configuring (ARCH=um)", file=sys.stderr, flush=True)
        open(os.path.join(tree, "conf.o"), "w").close()  # kconfig's own tool: not yet the build
        time.sleep(1.5)
        print("lab kernel: building with 2 jobs", file=sys.stderr, flush=True)
        for i in range(6):
            open(os.path.join(tree, f"f{{i}}.o"), "w").close()
            time.sleep(0.5)
        for i in range(5):  # the tree removed after the link (kernel/build-uml.sh): no count falls back
            os.remove(os.path.join(tree, f"f{{i}}.o"))
        time.sleep(1.2)
        print("/cache/kernel/uml7.3-abc/linux")
    """)
    env = {**os.environ, "TORTOISE_CACHE": str(tmp_path), "TORTOISE_KERNEL_SERIES": "7.3"}
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "objects-7.3").write_text("10\n")  # an earlier build's count: the total
    p = subprocess.run([sys.executable, "-c", "import sys; from tortoiselab.host import buildprogress as bp; "
                        "bp.PLAIN_EVERY_S = 0.5; sys.exit(bp.main(sys.argv[1:]))", sys.executable, "-c", build],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "/cache/kernel/uml7.3-abc/linux"
    lines = p.stderr.splitlines()
    assert lines[:2] == ["lab kernel: configuring (ARCH=um)", "lab kernel: building with 2 jobs"]
    counts = [int(ln.split()[2]) for ln in lines[2:] if "files compiled" in ln]
    assert counts and counts == sorted(counts) and counts[-1] >= 4
    assert all("of about 10 files compiled" in ln for ln in lines[1:] if "files compiled" in ln)
    assert int((tmp_path / "kernel" / "objects-7.3").read_text()) == counts[-1]


def test_wrapper_returns_the_commands_failure_and_records_nothing(tmp_path):
    env = {**os.environ, "TORTOISE_CACHE": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "tortoiselab.host.buildprogress", sys.executable, "-c",
                        "import sys; print('lab kernel: option did not take effect', file=sys.stderr); sys.exit(3)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3
    assert p.stderr.strip() == "lab kernel: option did not take effect"
    assert not (tmp_path / "kernel" / "objects-7.3").exists()
