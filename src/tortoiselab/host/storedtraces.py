"""The capacity traces a results folder's runs used, stored with the folder
(docs/traces.md, "Traces of a stored experiment"; docs/faults.md).

A trace the user names by path (`trace_down: ~/cell.down`) is the user's
choice when `tortoise run` reads the user's file. The same reference in the
folder's experiment.yaml, read later by `tortoise verify`, `report`,
`grade`, `ls` or a resume, is a results folder's word, and a folder may be
anyone's: it must not make the reader open a file elsewhere on the machine
(`trace_down: /etc/shadow`). So the runner stores what it read:

    <exp>/.lab/traces/<sha256>      a copy of each trace that is not shipped
    <exp>/.lab/traces/index.json    reference as the file writes it ->
                                    {"file", "name", "sha256"} (the trace as
                                    the runs recorded it, so their ids stay)

and a reader of the folder validates its experiment, and its records'
traces, inside `folder_traces(exp_dir)`: a shipped trace is read from the
project (topologies/traces/), every other trace from the copy whose sha256
the run recorded, reached without following a link (host/safefs.py). A
reference the index does not hold, or a copy that is missing, is refused
naming the folder and the fix; the file the reference names is never
opened nor looked at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tortoiselab.host import safefs
from tortoiselab.host.store import files
from tortoiselab.spec import trace as tr

TRACES = Path(".lab") / "traces"
INDEX = "index.json"
MAX_INDEX_BYTES = 1 << 20  # a reference per trace of the sweep: kilobytes
_SHA = re.compile(r"^[0-9a-f]{64}$")
NOT_READ = "a stored experiment's traces are the project's"


def fix_for(exp_dir: Path) -> str:
    return (f"run the experiment file again (`tortoise run FILE --results {exp_dir.parent}`: it stores the copy "
            "with the folder and redoes no run) on the machine that has the trace (docs/traces.md)")


class FolderTraces:
    """The traces of one results folder (spec/trace.TraceSource)."""

    def __init__(self, exp_dir: Path) -> None:
        self.exp_dir = Path(exp_dir)
        self._index: dict[str, dict] | None = None
        self._data: dict[str, bytes] = {}
        self.refused: list[str] = []  # every refusal, for a reader that names them (host/verify.py)

    def _refuse(self, what: str) -> tr.TraceError:
        self.refused.append(what)
        return tr.TraceError(what)

    def index(self) -> dict[str, dict]:
        if self._index is None:
            try:
                self._index = _read_index(self.exp_dir)
            except tr.TraceError as exc:
                raise self._refuse(str(exc)) from None
        return self._index

    def reference(self, ref: str) -> dict:
        entry = self.index().get(ref)
        if entry is None:
            raise self._refuse(
                f"{ref!r} is not read: {NOT_READ} ({tr.TRACE_DIR}) or the copies stored with its runs "
                f"({self.exp_dir / TRACES}), never a file the folder names elsewhere, and this folder holds no "
                f"copy of it: {fix_for(self.exp_dir)}")
        return entry

    def data(self, sha256: str) -> tuple[bytes, str]:
        f = self.exp_dir / TRACES / sha256
        if not _SHA.match(sha256):
            raise self._refuse(f"a trace's sha256 {sha256[:70]!r} is not 64 hex digits; the folder's record is "
                                "damaged (`tortoise verify` names it)")
        if sha256 not in self._data:
            try:  # no link followed below the folder, no FIFO opened, never more than a trace may hold
                self._data[sha256] = safefs.read_bytes_regular(f, self.exp_dir, doing=f"reading trace {f}",
                                                               limit=tr.MAX_TRACE_BYTES + 1)
            except FileNotFoundError:
                raise self._refuse(f"{f}: no stored copy of the trace its runs used (sha256 {sha256[:12]}...): "
                                    f"{fix_for(self.exp_dir)}") from None
            except (OSError, *safefs.REFUSED) as exc:
                raise self._refuse(f"{f}: {exc}") from None
        return self._data[sha256], str(f)


def _read_index(exp_dir: Path) -> dict[str, dict]:
    """The folder's index ({} when it has none); TraceError naming a damaged one."""
    f = exp_dir / TRACES / INDEX
    try:
        data = safefs.read_bytes_regular(f, exp_dir, doing=f"reading {f}", limit=MAX_INDEX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except (OSError, *safefs.REFUSED) as exc:
        raise tr.TraceError(f"{f}: {exc}") from None
    try:
        doc = json.loads(data) if len(data) <= MAX_INDEX_BYTES else None
    except ValueError:
        doc = None
    ok = isinstance(doc, dict) and all(
        isinstance(k, str) and isinstance(v, dict) and set(v) == {"file", "name", "sha256"}
        and all(isinstance(x, str) for x in v.values()) and _SHA.match(v["sha256"]) for k, v in doc.items())
    if not ok:
        raise tr.TraceError(f"{f}: not an index of stored traces (reference -> file, name, sha256, at most "
                            f"{MAX_INDEX_BYTES:,} bytes); move it away, then {fix_for(exp_dir)}")
    return doc


@contextmanager
def folder_traces(exp_dir: Path, source: FolderTraces | None = None) -> Iterator[FolderTraces]:
    """Inside: traces are read from the project's or from exp_dir's copies
    only (spec/trace.from_source)."""
    source = FolderTraces(exp_dir) if source is None else source
    with tr.from_source(source):
        yield source


def store_copies(exp_dir: Path, refs: dict[str, dict]) -> int:
    """Store a copy of every trace `refs` names (reference -> the trace as
    validated, spec/trace.seen) that is not shipped, by its sha256, and the
    index of the references; returns how many copies were written. A file
    whose bytes changed since it was validated is refused (TraceError)."""
    refs = {r: e for r, e in refs.items() if not ("/" not in r and r in tr.shipped_traces())}
    if not refs:
        return 0
    folder = exp_dir / TRACES
    files.make_dirs(exp_dir, folder, doing=f"storing traces in {folder}")
    written = 0
    for entry in refs.values():
        if tr.shipped_file(entry["file"]) is not None or (folder / entry["sha256"]).exists():
            continue
        path = Path(entry["file"])
        source = path if path.is_absolute() else tr.REPO_DIR / path
        with open(source, "rb") as fh:  # the user's own file: `tortoise run` read it a moment ago
            data = fh.read(tr.MAX_TRACE_BYTES + 1)
        sha, _ = tr.parse_trace_bytes(data, str(source))
        if sha != entry["sha256"]:
            raise tr.TraceError(f"{source}: changed while the run was set up; run again")
        written += files.write_once(exp_dir, folder / sha, data, doing=f"storing trace {source}")
    index = {**_read_index(exp_dir), **refs}
    files.write_file(exp_dir, folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n",
                     doing=f"storing {folder / INDEX}")
    return written
