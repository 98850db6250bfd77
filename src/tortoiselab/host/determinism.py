"""Deterministic mode: the same run twice on the virtual clock gives the same
numbers, to the microsecond, and `tortoise run FILE --verify-determinism N`
shows it for a sample of an experiment's completed runs.

What had to be removed for that is in docs/determinism.md (the guest's wall
clock start, certificate and header lengths, Python's hash seed, ...). This
module holds what checks it:

- `fingerprint(run_dir)`: what must repeat, read from a stored run: its PLT,
  response bytes, the server's retransmissions (counted in server.pcap's
  connections table: host/store/captures.py) and every packet of the server-side capture, with its
  timestamp in microseconds after the first packet and its headers normalized (connections numbered
  in order of appearance, sequence numbers and TCP timestamps relative to
  their first value: ports, initial sequence numbers and timestamp offsets
  are random in the kernel and change nothing else);
- `compare_fingerprints(a, b)`: every difference between two fingerprints;
- `verify(...)`: rerun a sample of completed runs into a scratch folder
  inside the results folder (`scratch_folder`: <exp>/.verify-<pid>, removed
  afterwards), with the stored experiment's own pages and certificates, and
  compare (`rerun_and_compare`, also the grader's audit: host/audit.py);
- `run_seeds(...)`: every seed a run used, recorded in run.json with the
  digest of the code that ran in the guest (guest.code_digest), so that a
  rerun can be checked against it.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tortoiselab.analysis.capture import TCP, TH_ACK, UDP, Packet, read_packets
from tortoiselab.analysis.flights import RETRANS_KINDS
from tortoiselab.host import backends, store
from tortoiselab.host.store import captures, files
from tortoiselab.host.locks import held_scratch
from tortoiselab.host.provenance import tool_versions
from tortoiselab.host.batches import Batch, batch_id, boot_prefix, jobs_for
from tortoiselab.host.runner import run_batch
from tortoiselab.spec import cols
from tortoiselab.spec.experiment import expand, load, run_order

@dataclass
class Fingerprint:
    """What must repeat in a run (see the module doc)."""

    run_id: str
    ok: bool
    plt_ms: float | None
    bytes: int | None
    retransmissions: dict[str, int]
    packets: list[tuple]
    seeds: dict = field(default_factory=dict)
    code: str | None = None
    clock: str | None = None


def _rel(x: int, base: int | None) -> int | None:
    """A 32-bit sequence number or timestamp relative to `base` (mod 2^32)."""
    return (x - base) % 2**32 if base is not None else None


def pcap_packets(path: Path, server_port: int = 443) -> list[tuple]:
    """One tuple per captured packet: (time in us after the capture's first
    packet: a run alone and the same run later in a batch start at other
    instants of their boots; then the headers that
    must repeat). TCP: ("tcp", connection number, "c2s"|"s2c", IP length,
    flags, seq and ack relative to each side's first sequence number,
    window, TSval and TSecr relative to each side's first TSval). UDP: ("udp",
    IP length, the ports' roles). Other IPv4: ("ip", IP length, protocol).
    Anything else: ("other", frame length). Read by
    tortoiselab.analysis.capture (an Ethernet capture)."""
    conns: dict[tuple, int] = {}
    isn: dict[tuple, int] = {}
    ts0: dict[tuple, int] = {}
    out: list[tuple] = []
    t0_us = None
    for p in read_packets(path, link="eth"):
        t_us = round(p.t_s * 1e6)
        t0_us = t_us if t0_us is None else t0_us
        t_us -= t0_us
        if p.ip_version != 4:
            out.append((t_us, "other", p.frame_len))
        elif p.transport == UDP:
            out.append((t_us, "udp", p.ip_len, "to53" if p.dport == 53 else "from53" if p.sport == 53 else ""))
        elif p.transport != TCP:
            out.append((t_us, "ip", p.ip_len, p.proto))
        else:
            out.append((t_us, "tcp") + _tcp_headers(p, server_port, conns, isn, ts0))
    return out


def _tcp_headers(p: Packet, server_port: int, conns: dict, isn: dict, ts0: dict) -> tuple:
    """A TCP segment's normalized headers (pcap_packets), numbering its
    connection and noting each side's first sequence number and TSval in
    conns, isn and ts0 as they come."""
    s2c = p.sport == server_port
    client = (p.dst, p.dport) if s2c else (p.src, p.sport)
    n = conns.setdefault(client, len(conns))
    me, peer = (n, s2c), (n, not s2c)
    isn.setdefault(me, p.seq)
    tsval, tsecr = p.options.tsval, p.options.tsecr
    if tsval is not None:
        ts0.setdefault(me, tsval)
    return (n, "s2c" if s2c else "c2s", p.ip_len, p.flags, _rel(p.seq, isn[me]),
            _rel(p.ack, isn.get(peer)) if p.flags & TH_ACK else None, p.window,
            _rel(tsval, ts0[me]) if tsval is not None else None,
            _rel(tsecr, ts0.get(peer)) if tsval is not None and tsecr else None)


def retransmissions(conns: list[dict]) -> dict[str, int]:
    """The server's retransmissions by kind, summed over the page's
    connections (the capture's connections table, analysis/conntable.py),
    plus their total."""
    counts = {k: 0 for k in RETRANS_KINDS}
    for c in conns:
        for k in RETRANS_KINDS:
            counts[k] += c["retrans_counts"][k]
    counts["total"] = sum(counts[k] for k in RETRANS_KINDS)
    return counts


def fingerprint(run_dir: Path) -> Fingerprint:
    """What must repeat of a stored run: its record read by the store (a
    damaged one is named with the fix, store.DamagedRecord), its capture."""
    rec = store.read_record(Path(run_dir))
    s = rec.summary
    pcap = Path(run_dir) / "server.pcap"
    return Fingerprint(
        run_id=rec.run_id, ok=rec.ok, plt_ms=s.plt_ms if s else None, bytes=s.bytes if s else None,
        retransmissions=retransmissions(captures.connections(run_dir)) if pcap.exists() else {},
        packets=pcap_packets(pcap) if pcap.exists() else [],
        seeds=rec.meta.seeds, code=rec.meta.code, clock=rec.meta.clock)


# --- comparing -----------------------------------------------------------------

@dataclass
class Comparison:
    run_id: str
    label: str
    a: Fingerprint
    b: Fingerprint
    differences: list[str]
    max_dt_us: int | None  # the largest timestamp difference of packets matched by position
    packets_differing: int  # packets whose time or headers differ

    @property
    def identical(self) -> bool:
        return not self.differences


def compare_fingerprints(a: Fingerprint, b: Fingerprint, label: str = "") -> Comparison:
    """Every difference between two runs' fingerprints, one line each."""
    diffs: list[str] = []
    if not (a.ok and b.ok):
        diffs.append(f"load failed: stored ok={a.ok}, rerun ok={b.ok}")
    for name in (cols.PLT, "bytes", "retransmissions"):
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            diffs.append(f"{name}: {va} vs {vb}")
    if not a.packets or not b.packets:
        diffs.append("server.pcap missing")
    if len(a.packets) != len(b.packets):
        diffs.append(f"server.pcap: {len(a.packets)} vs {len(b.packets)} packets")
    dts = [abs(x[0] - y[0]) for x, y in zip(a.packets, b.packets)]
    n_diff = sum(1 for x, y in zip(a.packets, b.packets) if x != y) + abs(len(a.packets) - len(b.packets))
    first = next((i for i, (x, y) in enumerate(zip(a.packets, b.packets)) if x != y), None)
    if first is not None:
        x, y = a.packets[first], b.packets[first]
        what = "time" if x[1:] == y[1:] else "headers"
        diffs.append(f"server.pcap: {n_diff} packets differ, first #{first} ({what}): {x} vs {y}")
    for k in sorted(set(a.seeds) | set(b.seeds)):
        if k in a.seeds and k in b.seeds and a.seeds[k] != b.seeds[k]:
            diffs.append(f"seed {k}: {a.seeds[k]} vs {b.seeds[k]}")
    return Comparison(a.run_id, label, a, b, diffs, max(dts) if dts else None, n_diff)


# --- tortoise run FILE --verify-determinism N ---------------------------------------

class DeterminismError(ValueError):
    """verify-determinism cannot run as asked; the message says what to do."""


def sample_runs(exp_dir: Path, run_ids: list[str], n: int, seed: int) -> list[str]:
    """n of the completed, successful runs among run_ids, chosen by the
    experiment's seed (the same sample every time)."""
    done = sorted(r for r in run_ids if store.completed(exp_dir, r) and store.read_record(exp_dir / r).ok)
    return random.Random(seed).sample(done, min(n, len(done)))


def verify(exp_file: Path, results: Path, n: int = 2, jobs: int | None = None, backend: str = "auto",
           clock: str = "auto", grid: str | None = None, scratch: Path | None = None,
           on_progress=None) -> dict:
    """Rerun n sampled completed runs of the experiment into a scratch folder
    inside its results folder (`scratch_folder`: never among its runs, and
    removed afterwards, also when runs differ: the comparisons say what
    differed) and compare each with its stored run, `jobs` reruns side by
    side (None: the runner's default, host/batches.default_jobs). The
    reruns use the stored experiment's pages and certificates (.lab), so
    that they get the same bytes."""

    if n < 1:
        raise DeterminismError("verify-determinism: give the number of runs to rerun, at least 1 (e.g. 2)")
    exp = load(Path(exp_file), grid=grid) if grid else load(Path(exp_file))
    specs = {r.run_id: r for r in run_order(exp, expand(exp))}
    exp_dir = Path(results).resolve() / exp.name
    lab = exp_dir / ".lab"
    if not (lab / "READY").exists():
        raise DeterminismError(f"verify-determinism: {exp_dir} has no completed runs to compare with; "
                               f"run the experiment first (tortoise run {exp_file})")
    chosen = sample_runs(exp_dir, list(specs), n, exp.seed)
    if not chosen:
        raise DeterminismError(f"verify-determinism: no completed successful run of {exp.name} in {exp_dir}; "
                               f"run the experiment first (tortoise run {exp_file})")
    stored_clocks = {store.read_record(exp_dir / r).meta.clock for r in chosen}
    ccs = sorted({specs[r].settings.server.cc for r in chosen})
    info = backends.choose(backend, clock, ccs)
    if info.clock != "virtual" or stored_clocks != {"virtual"}:
        raise DeterminismError(
            "verify-determinism: needs runs on the virtual clock (uml backend, --clock virtual); on the real "
            f"clock a run depends on the machine's load and is not repeatable (stored runs: "
            f"{', '.join(sorted(map(str, stored_clocks)))} clock; this rerun: {info.backend}, {info.clock} clock). "
            "bench/determinism.py shows the spread of real-clock reruns.")
    try:
        jobs = jobs_for(jobs, info.backend, info.clock)
    except ValueError as exc:
        raise DeterminismError(f"verify-determinism: {exc}") from None
    t0 = time.monotonic()
    with scratch_folder(exp_dir, scratch) as work_dir:
        comps = rerun_and_compare(exp_dir, chosen, specs, info, work_dir, jobs, on_progress)
    return {"experiment": exp.name, "stored": str(exp_dir), "scratch": str(work_dir), "comparisons": comps,
            "wall_seconds": round(time.monotonic() - t0, 1),
            "backend": info.backend, "clock": info.clock}


def rerun_and_compare(exp_dir: Path, chosen: list[str], specs: dict, info: backends.BackendInfo, work_dir: Path,
                      jobs: int = 1, on_progress=None) -> list[Comparison]:
    """Rerun each chosen stored run of exp_dir into work_dir (with the
    folder's own pages and certificates, .lab) and compare it with its
    stored run. specs: run id -> RunSpec of the experiment. The chosen runs
    of one batch share one boot: the batch again up to its last chosen run,
    the others loaded as replays, so that rerunning every run of a folder
    costs what running it did (one boot per batch)."""
    lab = exp_dir / ".lab"
    versions = tool_versions()
    groups: dict[tuple, list[str]] = {}
    for run_id in chosen:
        groups.setdefault(tuple(r.run_id for r in stored_batch(exp_dir / run_id, specs)), []).append(run_id)

    def one(group: tuple[tuple, list[str]]) -> list[Comparison]:
        # the runs' own batch again, up to the last chosen: on the virtual clock a run
        # repeats exactly after the same loads in the same boot (docs/determinism.md,
        # "Batches"); the batch's other runs are loaded as replays, only the chosen stored
        ids, mine = group
        members = [specs[r] for r in ids]
        loads = boot_prefix(members, max(mine, key=ids.index))
        out = work_dir / f"{batch_id(list(ids))}.batch" if len(members) > 1 else work_dir
        if out != work_dir:  # never through a link (host/store/files.py)
            files.make_dir(work_dir, out, exist_ok=True, doing=f"verify-determinism scratch {work_dir}")
        run_batch(loads, out, info, lab / "site", lab / "pki", versions,
                  batch=Batch(batch_id(list(ids)), tuple(members)),
                  replay=[r.run_id for r in loads if r.run_id not in mine])
        comps = []
        for run_id in mine:
            c = compare_fingerprints(fingerprint(exp_dir / run_id), fingerprint(out / run_id), _label(specs[run_id]))
            if on_progress:
                on_progress(c)
            comps.append(c)
        return comps

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        by_id = {c.run_id: c for cs in pool.map(one, groups.items()) for c in cs}
    return [by_id[r] for r in chosen]


def stored_batch(run_dir: Path, specs: dict) -> list:
    """The runs of a stored run's batch, in their order (meta.batch.runs;
    in format 3 and 4 its boot's runs); the run alone if it ran alone or
    before batches."""
    rec = store.read_record(run_dir)
    ids = (rec.meta.batch.runs if rec.meta.batch else None) or [rec.run_id]
    if rec.run_id not in ids:
        raise DeterminismError(f"verify-determinism: {run_dir.name}'s record names a batch without it "
                               f"({', '.join(ids)}): it cannot be rerun as it ran")
    missing = [r for r in ids if r not in specs]
    if missing:
        raise DeterminismError(f"verify-determinism: {run_dir.name} ran in a boot with runs the experiment no "
                               f"longer has ({', '.join(missing)}); it cannot be rerun as it ran")
    return [specs[r] for r in ids]


SCRATCH_PREFIX = ".verify-"  # a dot folder: the store, the runner and `tortoise clean` pass it by


@contextlib.contextmanager
def scratch_folder(exp_dir: Path, scratch: Path | None = None) -> Iterator[Path]:
    """A new folder for reruns inside the results folder, <exp>/.verify-<pid>
    (a dot folder the store ignores: store.run_dirs), removed when the block
    ends, however it ends; what differed is in the comparisons, not in the
    folder. Where the reruns lie does not matter to them: the guest sees its
    work folder and the site at fixed paths (docs/determinism.md, "the work
    folder's place", "the results folder's place"). scratch: a folder of the
    caller's to use instead (made if missing, removed after)."""
    d = Path(scratch).resolve() if scratch else Path(exp_dir) / f"{SCRATCH_PREFIX}{os.getpid()}"
    doing = f"verify-determinism scratch {d}"
    with contextlib.ExitStack() as stack:
        try:  # never through a link (host/store/files.py)
            files.ensure_folder(d.parent) if scratch else None  # the caller's own folder
            # in use while this process holds its lock: `tortoise clean` removes it only once free
            stack.enter_context(held_scratch(Path(exp_dir), d, doing))
        except FileExistsError:
            raise DeterminismError(f"verify-determinism: {d} exists (left by an earlier check that was killed?); "
                                   f"`tortoise clean` removes it once no verify holds it (or remove it (rm -r {shlex.quote(str(d))})); "
                                   "then try again") \
                from None
        try:
            yield d
        finally:
            with contextlib.suppress(OSError):
                files.remove(d.parent, d, doing=doing)


def point_label(point: dict) -> str:
    """A sweep point as field=value pairs, each field by its last name; a
    linked axis ("server.cc+path.rtt_ms": [hybla, 100]) gives one pair per
    field (cc=hybla, rtt_ms=100)."""
    pairs = []
    for k, v in point.items():
        names = k.split("+")
        if len(names) > 1 and isinstance(v, (list, tuple)) and len(v) == len(names):
            pairs += list(zip(names, v))
        else:
            pairs.append((k, v))
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in pairs)


def _label(spec) -> str:
    point = point_label(spec.point)
    return f"{point + ', ' if point else ''}rep {spec.repetition}"


def format_verification(rep: dict) -> str:
    lines = [f"verify-determinism: {rep['experiment']}: {len(rep['comparisons'])} runs rerun on the "
             f"{rep['clock']} clock into {rep['scratch']} (removed) ({rep['wall_seconds']} s)",
             f"{'run':<13} {'PLT ms stored':>14} {'rerun':>11} {'bytes':>8} {'retrans':>8} "
             f"{'packets':>8} {'max |dt| us':>11}  {'verdict':<9}  point"]
    for c in rep["comparisons"]:
        same = lambda x, y: "same" if x == y else "DIFF"  # noqa: E731
        lines.append(f"{c.run_id:<13} {_f(c.a.plt_ms):>14} {_f(c.b.plt_ms):>11} "
                     f"{same(c.a.bytes, c.b.bytes):>8} {same(c.a.retransmissions, c.b.retransmissions):>8} "
                     f"{len(c.b.packets):>8} {_f(c.max_dt_us):>11}  "
                     f"{'identical' if c.identical else 'DIFFERENT':<9}  {c.label}")
        for d in c.differences:
            lines.append(f"    {d}")
        if not c.identical and c.a.code and c.b.code and c.a.code != c.b.code:
            lines.append("    note: the lab's code changed since the stored run (code digest "
                         f"{c.a.code[:12]} vs {c.b.code[:12]}); a run is repeatable only with the same code")
    bad = [c for c in rep["comparisons"] if not c.identical]
    lines.append(f"{len(rep['comparisons']) - len(bad)} of {len(rep['comparisons'])} runs identical "
                 "(PLT, bytes, retransmissions, every server-side packet's time and headers)")
    return "\n".join(lines)


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def cli_verify(a) -> int:
    """`tortoise run FILE --verify-determinism [N]`: 0 when every rerun run is
    identical to its stored run, 3 otherwise (what differed is printed; the
    scratch folder inside the results folder is removed either way)."""
    rep = verify(Path(a.file), Path(a.results), n=a.verify_determinism, jobs=a.jobs, backend=a.backend,
                 clock=a.clock, grid=getattr(a, "grid", None),
                 on_progress=lambda c: print(f"  {c.run_id}: {'identical' if c.identical else 'DIFFERENT'}",
                                             flush=True))
    print(format_verification(rep))
    return 0 if all(c.identical for c in rep["comparisons"]) else 3
