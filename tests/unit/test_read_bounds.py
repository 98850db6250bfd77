"""Every read of a results folder bounded before it happens (issue 50,
Build 2; spec/bounds.READ_BOUNDS, host/safefs.open_regular,
host/readfiles.read_parquet, host/verify.present_files; docs/inputs.md,
"Files a reader reads"). A file above its bound, or above the size its
manifest records, is refused by fstat before it is read or hashed; a
runs.parquet's rows are counted from its footer before a value is decoded.

Seen before (issue 50): a sparse 1.5 GB run.json, `ls` and `verify` 28 s
and 3.2 GB each; a 2.5 MB runs.parquet of 300 million rows, `verify` 63 s
and 8.4 GB, `report` 98 s and 8.5 GB; a sparse 10 GB page.har whose
manifest says 2,558 bytes, hashed by `verify` for 72 s (and by grade,
report and resume). Each command here runs in a child limited to 1.5 GB
of address space (the code before took all it could get), first on a
clean copy of the folder (its imports and its own work), then on the
damaged one: the time (CPU, and the wall clock) and the growth of its
peak memory (VmHWM) are those of the refusal."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.results_copy import stored_copy
from tests.unit.test_grade import EXP, LAB, write_runs
from tortoiselab.host import manifests, readfiles, safefs, setaside, store, verify
from tortoiselab.project import PKG_DIR
from tortoiselab.spec import bounds

SRC = PKG_DIR.parent  # the child runs the code under test
NAME = "initcwnd@ci"
GB = 1 << 30

# the child: the command once on a clean folder (warm), then on the damaged one, measured
_MEASURE = """
import json, sys, time
from tortoiselab.cli import main

def hwm_kb():
    return int(next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")).split()[1])

warm, argv = json.loads(sys.argv[1]), json.loads(sys.argv[2])
t = time.monotonic()
warm_rc = main(warm) if warm else None
warm_s = time.monotonic() - t
before = hwm_kb()
t, cpu = time.monotonic(), time.process_time()
if argv[0] == "resume":  # what `tortoise run` does first on a folder it resumes (host/runner.run_experiment)
    from pathlib import Path
    from tortoiselab.host import setaside
    from tortoiselab.spec.experiment import expand, load, run_order
    exp = load(Path(argv[1]) / "experiment.yaml", grid=argv[2])
    print(setaside.move_damaged_aside(Path(argv[1]), [r.run_id for r in run_order(exp, expand(exp))], sliced=False))
    rc = 0
else:
    rc = main(argv)
seconds, cpu_s = time.monotonic() - t, time.process_time() - cpu
print(json.dumps({"rc": rc, "warm_rc": warm_rc, "warm_s": warm_s, "seconds": seconds, "cpu_s": cpu_s,
                  "grew_mb": (hwm_kb() - before) / 1024, "peak_mb": hwm_kb() / 1024}))
"""


def _limit_memory() -> None:  # 1.5 GB of address space: the unfixed readers took it all
    resource.setrlimit(resource.RLIMIT_AS, (3 * GB // 2, 3 * GB // 2))


def measured(argv: list[str], warm: list[str] | None = None, cwd: Path | None = None,
             timeout_s: int = 120) -> tuple[subprocess.CompletedProcess, dict]:
    """`tortoise <argv>` (or "resume FOLDER GRID") in a child under
    _limit_memory, after `tortoise <warm>` in the same child: the process
    and its measure (rc, seconds, grew_mb: the growth of its peak memory)."""
    p = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps(warm or []), json.dumps(argv)],
                       capture_output=True, text=True, timeout=timeout_s, preexec_fn=_limit_memory,
                       cwd=cwd, env={**os.environ, "PYTHONPATH": str(SRC), "MPLBACKEND": "Agg",
                                     # glibc reserves 64 MB of address space per thread's arena (up to 8 per
                                     # core): under the 1.5 GB limit a thread's start then failed at random
                                     # ("cannot allocate memory for thread-local data"), whatever the reader did
                                     "MALLOC_ARENA_MAX": "2"})
    assert p.stdout and p.stdout.splitlines()[-1].startswith("{"), p.stderr[-3000:]
    return p, json.loads(p.stdout.splitlines()[-1])


def sparse(f: Path, size: int) -> None:
    """f replaced by a sparse file of `size` bytes (no disk taken)."""
    f.unlink(missing_ok=True)
    with open(f, "wb") as fh:
        fh.truncate(size)


def bounded(out: dict, seconds: float = 1.0, mb: float = 100) -> None:
    """Under a second of CPU (the wall clock, on a machine shared by other
    work, within five) and under 100 MB more than the clean folder's peak."""
    assert out["cpu_s"] < seconds, out
    assert out["seconds"] < 5 * seconds, out
    assert out["grew_mb"] < mb, out


@pytest.fixture
def two(tmp_path) -> tuple[Path, Path]:
    """(a clean stored copy of initcwnd@ci, another to damage), each in a
    results root of its own."""
    return stored_copy(NAME, tmp_path / "clean"), stored_copy(NAME, tmp_path / "results")


# --- the bounds and the helper ------------------------------------------------------


def test_the_bounds_are_in_one_place_and_far_above_what_the_lab_writes():
    canned = Path(__file__).resolve().parents[1] / "data" / "runs"
    for f in canned.rglob("*"):
        if f.is_file():
            assert f.stat().st_size * 10 < bounds.read_bound(f.name), f
    assert bounds.read_bound("run.json") == 16 << 20
    assert bounds.read_bound("server.pcap") == bounds.read_bound("client.pcap") == 1 << 30
    assert bounds.read_bound("console.log") == bounds.read_bound("page.har") == 64 << 20
    assert bounds.read_bound("map.json") == bounds.READ_BOUND_OTHER


def test_a_file_above_its_bound_is_refused_by_fstat_never_read(tmp_path):
    f = tmp_path / "run.json"
    sparse(f, 1500 << 20)
    with pytest.raises(safefs.TooLarge) as e:
        safefs.read_bytes_regular(f, tmp_path, doing="test")
    assert str(e.value).startswith(f"test: {f} has 1,572,864,000 bytes (1.5 GiB), above the 16,777,216 bytes "
                                   "(16.0 MiB) a reader reads of such a file: not read")
    assert "mv " in str(e.value)
    assert isinstance(e.value, safefs.REFUSED)
    (tmp_path / "small").write_bytes(b"x" * 10)
    with pytest.raises(safefs.TooLarge, match="above the 9 bytes"):
        safefs.read_bytes_regular(tmp_path / "small", tmp_path, max_bytes=9)
    assert safefs.read_bytes_regular(tmp_path / "small", tmp_path, max_bytes=10) == b"x" * 10


# --- a sparse 1.5 GB run.json ---------------------------------------------------------


@pytest.mark.parametrize("command", ["ls", "verify"])
def test_a_sparse_run_json_is_refused_in_a_second_and_100_mb(two, command):
    clean, folder = two
    a = store.run_dirs(folder)[0].name
    sparse(folder / a / store.RECORD, 1500 << 20)
    if command == "ls":
        p, out = measured(["ls", "--results", str(folder.parent)], warm=["ls", "--results", str(clean.parent)])
        assert out["rc"] == 0 and "1/2 done, 0 failed, 0 running, 0 interrupted, 1 damaged" in p.stdout
    else:
        p, out = measured(["verify", str(folder)], warm=["verify", str(clean)])
        assert out["rc"] == 1 and out["warm_rc"] == 0
        assert (f"run {a}: {folder / a / store.RECORD}: 1,572,864,000 bytes (1.5 GiB), above the 16,777,216 bytes "
                "(16.0 MiB) a reader reads of such a file: not read") in p.stdout
    assert "Traceback" not in p.stderr
    bounded(out)


# --- a sparse 10 GB page.har whose manifest says 2,558 bytes ------------------------------


def _har_in_manifest(run_dir: Path, size: int = 10 * GB) -> None:
    """A sparse page.har of `size` bytes, and the run's manifest rewritten
    to list it at 2,558 bytes (what a student's folder could say)."""
    sparse(run_dir / "page.har", size)
    mf = run_dir / manifests.MANIFEST
    doc = json.loads(mf.read_text())
    doc["files"]["page.har"] = {"bytes": 2558, "sha256": "0" * 64}
    mf.write_text(json.dumps(doc))


def test_a_file_whose_size_is_not_its_manifests_is_never_hashed(tmp_path, monkeypatch):
    folder = stored_copy(NAME, tmp_path / "results")
    a = store.run_dirs(folder)[0]
    _har_in_manifest(a)
    hashed = []
    real = manifests.hashlib.sha256

    def counting(*args):
        hashed.append(args)
        return real(*args)

    monkeypatch.setattr(manifests.hashlib, "sha256", counting)
    problems, _ = verify.check_run(a)
    assert [(p.file.name, p.what) for p in problems] == [
        ("page.har", "changed since the run was stored: 10,737,418,240 bytes (10.0 GiB) now, 2,558 bytes (2.5 KiB) "
                     "in the manifest (not hashed: the size differs)")]
    assert len(hashed) == 3  # run.json, cwnd.json, server.pcap: not the HAR


def test_a_file_above_its_bound_is_not_hashed_whatever_its_manifest_says(tmp_path):
    folder = stored_copy(NAME, tmp_path / "results")
    a = store.run_dirs(folder)[0]
    sparse(a / "page.har", 10 * GB)
    doc = json.loads((a / manifests.MANIFEST).read_text())
    doc["files"]["page.har"] = {"bytes": 10 * GB, "sha256": None}  # a forged entry that agrees
    (a / manifests.MANIFEST).write_text(json.dumps(doc))
    problems, _ = verify.check_run(a)
    assert [(p.file.name, p.what.split(":")[0]) for p in problems] == [
        ("page.har", "10,737,418,240 bytes (10.0 GiB), above the 67,108,864 bytes (64.0 MiB) a reader reads of "
                     "such a file")]
    assert "not hashed" in problems[0].what


def test_adopt_refuses_a_file_above_its_bound_unhashed(tmp_path):
    folder = stored_copy(NAME, tmp_path / "results", manifests=False)
    a = store.run_dirs(folder)[0]
    sparse(a / "server.pcap", 2 * GB)
    with pytest.raises(store.StoreError, match=r"server.pcap has 2,147,483,648 bytes \(2.0 GiB\), above the "
                                               r"1,073,741,824 bytes"):
        manifests.manifest_of(a, bounded=True)
    assert not (a / manifests.MANIFEST).exists()


@pytest.mark.parametrize("command", ["verify", "report", "resume"])
def test_a_sparse_har_listed_small_is_refused_by_its_size(two, command):
    clean, folder = two
    a = store.run_dirs(folder)[0].name
    _har_in_manifest(folder / a)
    if command == "verify":
        p, out = measured(["verify", str(folder)], warm=["verify", str(clean)])
        assert out["rc"] == 1 and "page.har: changed since the run was stored: 10,737,418,240 bytes" in p.stdout
    elif command == "report":
        p, out = measured(["report", str(folder), "--out", str(folder.parent / "r.html")],
                          warm=["report", str(clean), "--out", str(clean.parent / "r.html")], timeout_s=300)
        assert out["rc"] == 2 and f"1 damaged runs ({NAME}/{a}); refused" in p.stderr
        assert "page.har: changed since the run was stored" in p.stderr
    else:
        p, out = measured(["resume", str(folder), "ci"], warm=["verify", str(clean)])
        assert f"'{a} -> {folder / store.DAMAGED}/{a}-" in p.stdout  # moved aside (kept), to be run again
    assert "Traceback" not in p.stderr
    bounded(out)


def test_grade_refuses_a_sparse_har_listed_small(tmp_path, monkeypatch):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "labs").mkdir()
    (tmp_path / "experiments" / "toy.yaml").write_text(EXP)
    (tmp_path / "labs" / "09-toy.md").write_text(LAB.format(extra=""))
    monkeypatch.chdir(tmp_path)  # write_runs takes paths as the grader is given them
    folder = write_runs(Path("results"), Path("experiments/toy.yaml"), "reduced")
    clean = tmp_path / "clean" / folder.name
    shutil.copytree(tmp_path / folder, clean)
    bad = store.run_dirs(tmp_path / folder)[0]
    _har_in_manifest(bad)
    # --audit 0: the canned runs were never run (no .lab to rerun them with); the refusal comes before any rerun
    p, out = measured(["grade", "labs/09", str(folder), "--audit", "0"], warm=["grade", "labs/09", str(clean), "--audit", "0"],
                      cwd=tmp_path)
    assert out["warm_rc"] == 0 and out["rc"] == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"1 damaged runs (toy@reduced/{bad.name}); refused" in p.stderr
    assert "page.har: changed since the run was stored: 10,737,418,240 bytes" in p.stderr
    assert "Traceback" not in p.stderr
    bounded(out)


# --- a runs.parquet of 300 million rows in 40 KB -----------------------------------------


def parquet_bomb(rows: int = 300_000_000, per_group: int = 1_000_000) -> bytes:
    """A valid Parquet file of `rows` rows: one column of one constant,
    dictionary encoded (a row group of 1 million rows is a few KB), whose
    footer lists that one row group rows/per_group times (pyarrow's
    FileMetaData.append_row_groups): every row group decodes, to the same
    million rows. 300 million rows in about 40 KB."""
    col = pa.DictionaryArray.from_arrays(pa.nulls(per_group, pa.int8()).fill_null(0), pa.array(["1072698669c7"]))
    buf = io.BytesIO()
    pq.write_table(pa.table({"run_id": col}), buf, row_group_size=per_group, compression="zstd")
    data = buf.getvalue()
    footer = struct.unpack("<I", data[-8:-4])[0]
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    for _ in range(rows // per_group - 1):
        meta.append_row_groups(pq.ParquetFile(io.BytesIO(data)).metadata)
    out = io.BytesIO()
    meta.write_metadata_file(out)
    thrift = out.getvalue()[4:-8]  # "PAR1" <footer> <length> "PAR1"
    return data[:-(8 + footer)] + thrift + struct.pack("<I", len(thrift)) + b"PAR1"


def test_the_bomb_is_a_parquet_file_of_300_million_rows():
    data = parquet_bomb()
    assert len(data) < 2_500_000
    f = pq.ParquetFile(io.BytesIO(data))
    assert f.metadata.num_rows == 300_000_000 and f.metadata.num_row_groups == 300
    assert f.read_row_group(299).num_rows == 1_000_000  # it decodes: the last row group too


def test_the_footer_is_checked_before_a_value_is_decoded(tmp_path):
    f = tmp_path / store.TABLE
    f.write_bytes(parquet_bomb())
    with pytest.raises(safefs.TooLarge) as e:
        readfiles.read_parquet(f, runs=2)
    assert e.value.what.startswith("its footer says 300,000,000 rows, more than the 1,002 a reader decodes: not "
                                   "decoded")
    meta = pq.ParquetFile(f).metadata
    assert readfiles.table_footer_problem(meta, 300_000_000) is None
    assert "more than the 299,999,999 a reader decodes" in readfiles.table_footer_problem(meta, 299_999_999)


@pytest.mark.parametrize("command", ["verify", "report"])
def test_a_parquet_bomb_is_refused_in_a_second_and_100_mb(two, command):
    clean, folder = two
    (folder / store.TABLE).write_bytes(parquet_bomb())
    if command == "verify":
        p, out = measured(["verify", str(folder)], warm=["verify", str(clean)])
        assert out["rc"] == 1
        assert (f"folder: {folder / store.TABLE}: its footer says 300,000,000 rows, more than the 1,002 a reader "
                "decodes: not decoded") in p.stdout
        assert f"fix: `tortoise verify {folder} --rebuild-table`" in p.stdout
        bounded(out)
    else:  # the records give the table, as for any bad table; the report's own work is the clean one's
        html = folder.parent / "r.html"
        p, out = measured(["report", str(folder), "--out", str(html)],
                          warm=["report", str(clean), "--out", str(clean.parent / "r.html")], timeout_s=300)
        assert out["rc"] == 0 and out["warm_rc"] == 0 and html.exists()
        assert "rebuilt in memory from the records" in p.stdout
        bounded(out, seconds=out["warm_s"] + 1.0)
    assert "Traceback" not in p.stderr


def test_a_table_with_a_few_rows_too_many_is_decoded_and_they_are_named(tmp_path):
    """Up to TABLE_EXTRA_ROWS rows without a run folder are decoded, so that
    verify names each (an edit, a run moved away); more are not."""
    folder = stored_copy(NAME, tmp_path / "results")
    df = pq.read_table(folder / store.TABLE).to_pandas()
    extra = df.iloc[[0] * 3].copy()
    extra["run_id"] = ["fffffffffff0", "fffffffffff1", "fffffffffff2"]
    pa_table = pa.Table.from_pandas(pd.concat([df, extra], ignore_index=True), preserve_index=False)
    pq.write_table(pa_table, folder / store.TABLE)
    assert {p.run for p in verify.verify_folder(folder).problems} == {"fffffffffff0", "fffffffffff1", "fffffffffff2"}
    assert readfiles.table_footer_problem(pq.ParquetFile(folder / store.TABLE).metadata, 4) is not None


def test_read_table_rebuilds_from_the_records_without_decoding_the_bomb(tmp_path):
    folder = stored_copy(NAME, tmp_path / "results")
    (folder / store.TABLE).write_bytes(parquet_bomb())
    df, rebuilt = store.read_table(folder)
    assert rebuilt and sorted(df["run_id"]) == [d.name for d in store.run_dirs(folder)]
