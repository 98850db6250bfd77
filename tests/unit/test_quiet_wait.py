"""The real clock's wait for a quiet CPU before a load (guest/clock.py):
its arithmetic on /proc/stat ticks, on a clock of the test's own."""

from pathlib import Path

import pytest

from tortoiselab.guest.clock import cpu_times, wait_until_quiet


class Ticks:
    """/proc/stat's (idle, total) after each window: `busy` is the busy
    fraction of each window in turn (100 ticks per window), and the test's
    clock moves by the window slept."""

    def __init__(self, busy: list[float]):
        self.busy, self.idle, self.total, self.t, self.i = busy, 0, 0, 0.0, 0

    def read(self) -> tuple[int, int]:
        return self.idle, self.total

    def sleep(self, s: float) -> None:
        self.t += s
        b = self.busy[min(self.i, len(self.busy) - 1)]
        self.i += 1
        self.idle += round(100 * (1 - b))
        self.total += 100

    def now(self) -> float:
        return self.t


def wait(busy: list[float], **kw) -> dict:
    t = Ticks(busy)
    return wait_until_quiet(read=t.read, sleep=t.sleep, now=t.now, **kw)


def test_it_starts_after_the_first_quiet_window():
    assert wait([0.9, 0.6, 0.15, 0.0]) == {"waited_s": 0.75, "idle": 0.85, "quiet": True}


def test_a_quiet_cpu_costs_one_window():
    assert wait([0.0]) == {"waited_s": 0.25, "idle": 1.0, "quiet": True}


def test_a_cpu_that_stays_busy_ends_the_wait_at_its_limit_and_says_so():
    assert wait([0.5], max_s=2.0) == {"waited_s": 2.0, "idle": 0.5, "quiet": False}


def test_the_threshold_is_inclusive():
    assert wait([0.2, 0.0], idle=0.8)["waited_s"] == 0.25
    assert wait([0.21, 0.0], idle=0.8)["waited_s"] == 0.5


def test_cpu_times_reads_idle_and_iowait_of_the_cpu_line(tmp_path: Path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 1000 20 3 7 15 40 0\ncpu0 50 2 25 500 10 1 3 7 20 0\nintr 1\n")
    assert cpu_times(stat) == (1020, 1200)


def test_cpu_times_refuses_a_file_without_the_cpu_line(tmp_path: Path):
    stat = tmp_path / "stat"
    stat.write_text("intr 1\n")
    with pytest.raises(RuntimeError, match="no cpu line"):
        cpu_times(stat)


def test_cpu_times_reads_this_machine():
    idle, total = cpu_times()
    assert 0 <= idle <= total and total > 0
