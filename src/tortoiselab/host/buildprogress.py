"""Progress of the lab kernel's build (kernel/build-uml.sh), for the ten
minutes a fresh machine spends on it (docs/make-targets.md):

    python -m tortoiselab.host.buildprogress bash kernel/build-uml.sh

runs the command and, while it runs, says how many of the kernel's files
are compiled, of how many, and about how long is left: one updating line on
a terminal, a plain line every PLAIN_EVERY_S seconds otherwise (a log, CI).
The command's own output passes through unchanged.

The count is the object files (`*.o`) in the build tree the command
extracted under the cache ($TORTOISE_CACHE, else ~/.cache/tortoiselab:
kernel/build-<hash>.XXXXXX/linux-source-*), a folder that appeared after the
command started, read every few seconds (links are not followed) from the
command's line BUILDING_LINE on (before it, configuring builds kconfig's
own tools, and the clock of the estimate would start too early). The
total is the count the last build of the same series reached, kept in the
cache (objects-<series>), else the count measured for the series' shipped
configuration (SHIPPED_TOTALS); a series without either gets the count
alone. Watching the tree leaves kernel/build-uml.sh, and with it the lab
kernel's input hash, as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tortoiselab.project import REPO_DIR

# object files a whole build made (`make all`: the kernel, its few stock
# modules), per series: 7.3 with kernel/uml-base.config + lab.config +
# lab-7.3.config over allnoconfig, the most a count every 10 s saw in its tree
# before `make clean` (2026-12-07, the project's 2-core machine; 1067 over
# defconfig before: docs/kernel-7.3.md, "A kernel of what the lab uses");
# 6.12 not counted
SHIPPED_TOTALS: dict[str, int] = {"7.3": 925}
PLAIN_EVERY_S = 10.0  # a plain line this often when the output is no terminal
TTY_EVERY_S = 2.0  # the updating line's refresh on a terminal
MIN_DONE_FOR_ESTIMATE = 0.03  # no time left is guessed before this share of the files is compiled
BUILDING_LINE = "lab kernel: building"  # kernel/build-uml.sh's line as `make all` starts


def cache_root() -> Path:
    """The lab kernel's cache, as kernel/build-uml.sh computes it."""
    if os.environ.get("TORTOISE_CACHE"):
        return Path(os.environ["TORTOISE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tortoiselab"


def series() -> str:
    """The series the build is of: TORTOISE_KERNEL_SERIES, else kernel/SERIES."""
    return os.environ.get("TORTOISE_KERNEL_SERIES") or (REPO_DIR / "kernel" / "SERIES").read_text(encoding="utf-8").strip()


def count_objects(tree: Path) -> int:
    """How many `*.o` files are under tree (links not followed; a folder
    removed while walking is skipped)."""
    n = 0
    for _dirpath, _dirs, names in os.walk(tree):
        n += sum(1 for f in names if f.endswith(".o"))
    return n


def expected_total(kernel_dir: Path, name: str) -> int | None:
    """The object count of the series' last whole build in this cache, else
    the shipped figure, else None."""
    try:
        return int((kernel_dir / f"objects-{name}").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return SHIPPED_TOTALS.get(name)


def clock(seconds: float) -> str:
    """A duration as people read it: '45 s', '3 min 05 s', '1 h 47 min'."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def left_s(done: int, total: int | None, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far; None before MIN_DONE_FOR_ESTIMATE
    of the files, without a total, or once the total is passed."""
    if not total or done < MIN_DONE_FOR_ESTIMATE * total or done >= total or elapsed_s <= 0:
        return None
    return elapsed_s * (total - done) / done


def status(done: int, total: int | None, elapsed_s: float) -> str:
    """The progress line: files compiled of the total, time so far, time left."""
    if not total:
        return f"lab kernel: {done} files compiled, {clock(elapsed_s)} so far"
    if done >= total:
        return f"lab kernel: {done} files compiled (about {total} expected), {clock(elapsed_s)} so far, linking"
    left = left_s(done, total, elapsed_s)
    tail = f", about {clock(left)} left" if left is not None else ""
    return f"lab kernel: {done} of about {total} files compiled ({100 * done // total} %), " \
           f"{clock(elapsed_s)} so far{tail}"


def new_tree(kernel_dir: Path, before: set[str]) -> Path | None:
    """The build tree of a build-* folder that was not there at the start."""
    try:
        folders = [d for d in kernel_dir.iterdir() if d.name.startswith("build-") and d.name not in before]
    except OSError:
        return None
    for d in sorted(folders):
        trees = [t for t in d.glob("linux-source-*") if t.is_dir() and not t.is_symlink()]
        if trees:
            return trees[0]
    return None


class Watcher:
    """Reads the build tree's count every few seconds and says it (stderr)."""

    def __init__(self, kernel_dir: Path, name: str, tty: bool, out=sys.stderr):
        self.kernel_dir, self.name, self.tty, self.out = kernel_dir, name, tty, out
        self.before = {d.name for d in kernel_dir.iterdir()} if kernel_dir.is_dir() else set()
        self.total = expected_total(kernel_dir, name)
        self.most = 0  # the highest count seen: the next build's total
        self.shown = ""
        self.building = threading.Event()  # the command said BUILDING_LINE
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def say(self, line: str) -> None:
        """A line of the command's own, above the updating line on a terminal."""
        if line.startswith(BUILDING_LINE):
            self.building.set()
        with self.lock:
            if self.tty and self.shown:
                self.out.write("\r\033[K" + line + "\n" + self.shown)
            else:
                self.out.write(line + "\n")
            self.out.flush()

    def show(self, line: str) -> None:
        with self.lock:
            self.out.write(("\r\033[K" + line) if self.tty else line + "\n")
            self.out.flush()
            self.shown = line if self.tty else ""

    def run(self) -> None:
        started = None
        while not self.stop.wait(TTY_EVERY_S if self.tty else PLAIN_EVERY_S if started else 1.0):
            tree = new_tree(self.kernel_dir, self.before) if self.building.is_set() else None
            if tree is None:
                continue  # extracting, configuring; or the kernel was in the cache
            started = started or time.monotonic()
            done = count_objects(tree)
            if done < self.most:
                continue  # the build tree is being removed after the link: nothing more is compiled
            self.most = done
            self.show(status(done, self.total, time.monotonic() - started))

    def finish(self, ok: bool) -> None:
        self.stop.set()
        with self.lock:
            if self.tty and self.shown:
                self.out.write("\r\033[K")
                self.out.flush()
            self.shown = ""
        if ok and self.most:  # the next build's total (a lower bound: counts are read every few seconds)
            try:
                (self.kernel_dir / f"objects-{self.name}").write_text(f"{self.most}\n", encoding="utf-8")
            except OSError:
                pass


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tortoiselab.host.buildprogress COMMAND [ARG...]", file=sys.stderr)
        return 2
    kernel_dir = cache_root() / "kernel"
    watcher = Watcher(kernel_dir, series(), sys.stderr.isatty())
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", bufsize=1)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        for line in proc.stderr:
            watcher.say(line.rstrip("\n"))
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.wait()
        rc = 130
    watcher.finish(rc == 0)
    thread.join(timeout=1)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
