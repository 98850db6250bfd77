"""Whether two checkouts read captures alike (figures, and a verdict): every
reader of the lab's captures run over the same pcaps by two source trees,
each output reduced to a digest, the digests compared.

    .venv/bin/python bench/capture_asbefore.py --old-src /work/main/src \
        [--new-src src] [--sample 200] [--seed 40] [RESULTS_GLOB ...]

The pcaps: every one under tests/data, and the server.pcap and client.pcap
of a seeded sample of --sample run folders among those the globs name
(default /work/repro/results/*@reduced/*/). Per pcap, each reader's output
(the connections table of tortoiselab.analysis.flights.analyze_pcap, with
the server's port 443 and inferred; determinism's packet fingerprint and
retransmission counts; pathloss's packet keys; dnstime's lookups) and, per
run folder or pair of lab captures, pathloss's losses. The trees are read
only; each runs in its own interpreter (PYTHONPATH=its src).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import inspect
import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
# the lab captures in tests/data that come as a server-side and client-side pair
DATA_PAIRS = (("flights_drop1_iw10.pcap", "flights_drop1_iw10_client.pcap"),
              ("flights_iw3.pcap", "flights_iw3_client.pcap"))


def _digest(fn, *args, **kw) -> str:
    """sha256 of a reader's output as canonical JSON (bytes as hex), or the
    error it raised (type and message)."""
    try:
        out = fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - an error is an output to compare too
        return f"error {type(exc).__name__}: {exc}"
    text = json.dumps(out, sort_keys=True, default=lambda b: b.hex() if isinstance(b, bytes) else repr(b))
    return hashlib.sha256(text.encode()).hexdigest()


def _packets(fp) -> int:
    """How many packets a pcap_packets output holds, or 0 for an error."""
    try:
        return len(fp())
    except Exception:  # noqa: BLE001
        return 0


def _retransmissions(determinism, flights, p: str) -> dict:
    """determinism's retransmission counts of a pcap: from its connections
    (a tree with the connections table, issue 40) or from the pcap (before)."""
    if "conns" in inspect.signature(determinism.retransmissions).parameters:
        return determinism.retransmissions(flights.analyze_pcap(p, keep_series=False))
    return determinism.retransmissions(Path(p))


def dump(pcaps: list[str], pairs: list[list[str]]) -> dict:
    """{name: digest} for every reader over every pcap and pair, with the
    tree on sys.path; also the packets the determinism reader saw."""
    from tortoiselab.analysis import dnstime, flights, pathloss
    from tortoiselab.host import determinism

    out, packets = {}, 0
    for p in pcaps:
        out[f"{p} conns443"] = _digest(flights.analyze_pcap, p)
        out[f"{p} conns_any"] = _digest(flights.analyze_pcap, p, server_port=None)
        out[f"{p} fingerprint"] = _digest(determinism.pcap_packets, Path(p))
        out[f"{p} retrans"] = _digest(_retransmissions, determinism, flights, p)
        out[f"{p} pathloss_keys"] = _digest(pathloss.tcp_packets, p)
        out[f"{p} dns"] = _digest(dnstime.lookups_ms, p)
        packets += _packets(lambda: determinism.pcap_packets(Path(p)))
    for s, c in pairs:
        out[f"{s} + {c} losses"] = _digest(pathloss.path_losses, s, c)
    return {"digests": out, "packets": packets}


def data_pcaps() -> list[str]:
    """Every pcap under tests/data, as a path relative to the repository."""
    return sorted(str(p.relative_to(ROOT)) for p in DATA.rglob("*.pcap"))


def inputs(globs: list[str], sample: int, seed: int) -> tuple[list[str], list[list[str]], int]:
    """The pcaps and pairs to read: tests/data's, and a seeded sample of run
    folders (those with a server.pcap) among the globs'; and how many run
    folders the sample was drawn from."""
    pcaps = data_pcaps()
    pairs = [[f"tests/data/{s}", f"tests/data/{c}"] for s, c in DATA_PAIRS]
    runs = sorted(d for g in globs for d in glob.glob(g) if os.path.isfile(os.path.join(d, "server.pcap")))
    for d in random.Random(seed).sample(runs, min(sample, len(runs))):
        s, c = os.path.join(d, "server.pcap"), os.path.join(d, "client.pcap")
        pcaps.append(s)
        if os.path.isfile(c):
            pcaps.append(c)
            pairs.append([s, c])
    return pcaps, pairs, len(runs)


def run_tree(src: str, pcaps: list[str], pairs: list[list[str]]) -> dict:
    """dump() in an interpreter whose tortoiselab is the tree at src."""
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
    proc = subprocess.run([sys.executable, __file__, "--dump"], input=json.dumps([pcaps, pairs]), env=env,
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("globs", nargs="*", default=["/work/repro/results/*@reduced/*/"])
    ap.add_argument("--old-src", help="the tree whose readers are the reference")
    ap.add_argument("--new-src", default=str(ROOT / "src"))
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--digests-out", help="also write the old tree's digests of tests/data's pcaps to this "
                    "JSON file (what tests/unit/test_capture.py compares with)")
    ap.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.dump:
        pcaps, pairs = json.load(sys.stdin)
        json.dump(dump(pcaps, pairs), sys.stdout)
        return 0
    if not a.old_src:
        ap.error("--old-src: give the source tree to compare with (e.g. a checkout of main's src)")
    pcaps, pairs, pool = inputs(a.globs, a.sample, a.seed)
    old, new = run_tree(a.old_src, pcaps, pairs), run_tree(a.new_src, pcaps, pairs)
    differ = sorted(k for k in old["digests"] if old["digests"][k] != new["digests"].get(k))
    errors = sum(1 for v in old["digests"].values() if v.startswith("error"))
    print(f"{len(pcaps)} pcaps ({len(pcaps) - len(list(DATA.rglob('*.pcap')))} from {min(a.sample, pool)} of "
          f"{pool} run folders), {len(pairs)} server/client pairs, {old['packets']} packets (old) / "
          f"{new['packets']} (new): {len(old['digests'])} outputs compared ({errors} errors in both), "
          f"{len(differ)} differ")
    for k in differ:
        print(f"  DIFFERS {k}: {old['digests'][k][:60]} vs {new['digests'].get(k, '-')[:60]}")
    for k, v in old["digests"].items():
        if v.startswith("error"):
            print(f"  error in both: {k}: {v[:160]}")
    if a.digests_out:
        local = set(data_pcaps())
        kept = {k: v for k, v in old["digests"].items() if k.split(" ")[0] in local}
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=a.old_src, capture_output=True,
                             text=True).stdout.strip() or "?"
        made_by = f"bench/capture_asbefore.py --old-src {a.old_src} (commit {rev})"
        Path(a.digests_out).write_text(json.dumps({"made_by": made_by,
                                                   "digests": kept}, indent=1, sort_keys=True) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
