"""What the virtual clock and common random numbers buy (issue 9), as figures.

1. Real vs virtual clock: the same small sweep (feed page, 100 ms RTT, 2 %
   loss, cubic and hybla) run twice on each clock of the uml backend, two
   labs at a time. Per run: the PLT of both passes and their difference, and
   how many server-side packets differ in time; on the virtual clock every
   difference is 0, on the real clock the machine's load shows.
2. Paired vs unpaired: hybla vs htcp on an India-like path (a region
   profile), the same number of runs per arm either way. Unpaired: every run
   has its own seed (independent loss and jitter draws). Paired (`paired:
   true`): the two arms of a repetition share the seed, so they meet the same
   draws. Printed: the p90 PLT difference hybla vs htcp in percent with its
   95 % bootstrap CI (tortoiselab.analysis.stats.percent_diff: pairs resampled
   together when paired, each arm on its own otherwise), the CI widths and
   their ratio paired / unpaired, and the rank test of each design
   (Wilcoxon signed-rank, Mann-Whitney U).

    .venv/bin/python bench/determinism.py [--reps 10] [--jobs 2] [--out DIR]

Figures, not assertions; a run's folder stays in --out for a look.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REAL_VS_VIRTUAL = """
name: clocks
repetitions: {reps}
seed: 21
path: {{rtt_ms: 100, loss_pct: 2, rate_mbit: 10}}
server: {{cc: cubic, initcwnd_pkts: 10}}
client: {{page: feed.html}}
sweep:
  server.cc: [cubic, hybla]
"""

PAIRING = """
name: {name}
repetitions: {reps}
seed: 33
paired: {paired}
path: {{region: {region}}}
server: {{cc: htcp, initcwnd_pkts: 10}}
client: {{page: feed.html}}
sweep:
  server.cc: [htcp, hybla]
"""


def run(yaml_text: str, results: Path, clock: str, jobs: int) -> dict[str, dict]:
    """Run an experiment (uml backend) and return its records by run id."""
    from tortoiselab.host.runner import run_experiment

    results.mkdir(parents=True, exist_ok=True)
    f = results / "experiment-in.yaml"
    f.write_text(yaml_text)
    t0 = time.monotonic()
    res = run_experiment(f, results, jobs=jobs, backend="uml", clock=clock)
    exp_dir = Path(res["dir"])
    recs = {p.parent.name: json.loads(p.read_text()) for p in exp_dir.glob("*/run.json")}
    print(f"  {exp_dir}: {len(recs)} runs, {res['failed_now']} failed, {time.monotonic() - t0:.0f} s wall",
          flush=True)
    return recs


def _same_code(c) -> str:
    """Whether both passes ran the same lab code in the guest (meta.code):
    a run repeats only with the same code (docs/determinism.md)."""
    if not (c.a.code and c.b.code):
        return "unknown"
    return "yes" if c.a.code == c.b.code else "NO (the code changed between the passes)"


def clocks(out: Path, reps: int, jobs: int) -> None:
    from tortoiselab.host.determinism import compare_fingerprints as compare, fingerprint

    print("== 1. the same sweep twice, on each clock ==", flush=True)
    text = REAL_VS_VIRTUAL.format(reps=reps)
    for clock in ("virtual", "real"):
        a = run(text, out / f"{clock}-a", clock, jobs)
        b = run(text, out / f"{clock}-b", clock, jobs)
        print(f"{clock} clock: {'run':<13} {'cc':<6} {'rep':>3} {'PLT pass 1':>11} {'pass 2':>9} "
              f"{'max-min ms':>10} {'packets differing':>18} {'max |dt| ms':>11}  same code")
        spreads = []
        for rid in sorted(a):
            if rid not in b or not (a[rid].get("ok") and b[rid].get("ok")):
                print(f"   {rid}: failed in a pass, skipped")
                continue
            c = compare(fingerprint(out / f"{clock}-a" / "clocks" / rid),
                        fingerprint(out / f"{clock}-b" / "clocks" / rid))
            p1, p2 = a[rid]["summary"]["plt_ms"], b[rid]["summary"]["plt_ms"]
            spreads.append(abs(p1 - p2))
            print(f"{'':<13}{rid:<13} {a[rid]['config']['server']['cc']:<6} {a[rid]['repetition']:>3} "
                  f"{p1:>11.3f} {p2:>9.3f} {abs(p1 - p2):>10.3f} "
                  f"{c.packets_differing:>8} of {len(c.a.packets):<6} "
                  f"{(c.max_dt_us or 0) / 1e3:>11.3f}  {_same_code(c)}")
        if spreads:
            print(f"{clock} clock: PLT spread (max-min over the two passes) per run: "
                  f"largest {max(spreads):.3f} ms, mean {sum(spreads) / len(spreads):.3f} ms\n", flush=True)


def pairing(out: Path, reps: int, jobs: int, region: str) -> None:
    import numpy as np

    from tortoiselab.analysis import stats

    print(f"== 2. paired vs unpaired: hybla vs htcp on {region}, {reps} runs per arm each ==", flush=True)
    widths = {}
    for paired in (False, True):
        name = "paired" if paired else "unpaired"
        recs = run(PAIRING.format(name=name, reps=reps, paired=str(paired).lower(), region=region),
                   out / name, "virtual", jobs)
        arm = {cc: sorted(((r["repetition"], r["seed"], r["summary"]["plt_ms"]) for r in recs.values()
                           if r.get("ok") and r["config"]["server"]["cc"] == cc)) for cc in ("htcp", "hybla")}
        if paired:  # pairs by seed (= by repetition here), a pair only when both arms completed
            common = sorted({s for _, s, _ in arm["htcp"]} & {s for _, s, _ in arm["hybla"]})
            c = np.array([p for _, s, p in arm["htcp"] if s in common])
            h = np.array([p for _, s, p in arm["hybla"] if s in common])
            test = stats.wilcoxon_signed_rank(c, h)
        else:
            c = np.array([p for *_, p in arm["htcp"]])
            h = np.array([p for *_, p in arm["hybla"]])
            test = stats.mann_whitney(c, h)
        est = stats.percent_diff(c, h, "p90", paired=paired, seed=0)
        widths[name] = est.high - est.low
        print(f"{name:>9}: n = {len(c)} htcp, {len(h)} hybla; p90 PLT htcp {np.quantile(c, 0.9):.1f} ms, "
              f"hybla {np.quantile(h, 0.9):.1f} ms; p90 difference hybla vs htcp {est.value:+.1f} % "
              f"[95 % CI {est.low:+.1f}, {est.high:+.1f}], width {widths[name]:.1f} points; "
              f"{test['test']} p = {test['p_value']:.3g}", flush=True)
        if paired:
            r = np.corrcoef(c, h)[0, 1] if len(c) > 2 else float("nan")
            print(f"{'':>9}  correlation of the arms' PLT across pairs: {r:.2f}")
            # the same paired runs, analysed as if unpaired: what pairing buys
            # in the analysis alone, free of the two designs' different samples
            for stat in ("p90", "p50", "mean"):
                w = [(e.high - e.low) for e in (stats.percent_diff(c, h, stat, paired=q, seed=0)
                                                for q in (True, False))]
                print(f"{'':>9}  same runs, {stat:>4} difference: CI width paired {w[0]:.1f} / as unpaired "
                      f"{w[1]:.1f} = {w[0] / w[1]:.2f}")
    print(f"CI width ratio paired / unpaired (two designs, each its own runs): "
          f"{widths['paired'] / widths['unpaired']:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10, help="repetitions per arm for the paired/unpaired part")
    ap.add_argument("--clock-reps", type=int, default=1, help="repetitions per arm for the clock part")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--region", default="india-mobile-2017")
    ap.add_argument("--out", default=None, help="results folder (default: a new temporary folder)")
    ap.add_argument("--only", choices=["clocks", "pairing"], default=None)
    a = ap.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="tortoise-bench-determinism-")).resolve()
    print(f"results under {out}", flush=True)
    t0 = time.monotonic()
    if a.only in (None, "clocks"):
        clocks(out, a.clock_reps, a.jobs)
    if a.only in (None, "pairing"):
        pairing(out, a.reps, a.jobs, a.region)
    print(f"bench: {time.monotonic() - t0:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
