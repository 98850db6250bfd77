"""The fairness question of experiments/tortoise-fairness.yaml (issue 21):
per algorithm, the page load's gain against a control algorithm and what it
costs the cross traffic sharing the bottleneck (docs/topologies.md).

Runs of one repetition share their seed (the experiment is paired), so each
algorithm's runs are matched to the control's by seed and the changes are
paired: the p90 of the PLT, and the mean throughput of the bulk and the web
cross flows during the page load (runs.parquet `cross_bulk_mbit`,
`cross_web_mbit`), each as a percent change with a 95 % percentile-bootstrap
interval (analysis/stats.percent_diff).

    python -m tortoiselab.analysis.fairness results/tortoise-fairness/runs.parquet
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pandas as pd

from tortoiselab.analysis.stats import Estimate, pair_rows, percent_diff
from tortoiselab.spec import cols

ARM = cols.CC
METRICS = ((cols.PLT, "p90"), ("cross_bulk_mbit", "mean"), ("cross_web_mbit", "mean"))


@dataclass(frozen=True)
class FairnessRow:
    cc: str
    runs: int
    plt_p90_ms: float
    bulk_mbit: float  # mean throughput of the bulk cross flows during the load
    changes: dict[str, Estimate] | None  # by metric, against the control; None for the control


def fairness_table(df: pd.DataFrame, control: str = "cubic", key: str = "seed") -> list[FairnessRow]:
    """One row per algorithm (the control first), from the ok runs."""
    ok = df[df[cols.OK].astype(bool)] if cols.OK in df else df
    rows = []
    for cc in sorted(ok[ARM].unique(), key=lambda c: (c != control, c)):
        sub = ok[ok[ARM] == cc]
        changes = None
        if cc != control:
            changes = {}
            for metric, stat in METRICS:
                p = pair_rows(ok, metric, ARM, control, cc, key)
                changes[metric] = percent_diff(p.control, p.arm, statistic=stat, paired=True)
        rows.append(FairnessRow(cc, len(sub), float(sub[cols.PLT].quantile(0.9)),
                                float(sub["cross_bulk_mbit"].mean()), changes))
    return rows


def format_table(rows: list[FairnessRow]) -> str:
    def est(e: Estimate) -> str:
        return f"{e.value:+6.1f} [{e.low:+6.1f}, {e.high:+6.1f}]"

    head = (f"{'cc':<10} {'runs':>4} {'PLT p90 ms':>10} {'PLT p90 change %':>24} {'bulk Mbit/s':>11} "
            f"{'bulk change %':>24} {'web change %':>24}")
    out = [head, "-" * len(head)]
    for r in rows:
        ch = r.changes
        cells = ["(control)", "", ""] if ch is None else [est(ch[m]) for m, _ in METRICS]
        out.append(f"{r.cc:<10} {r.runs:>4} {r.plt_p90_ms:>10.1f} {cells[0]:>24} {r.bulk_mbit:>11.3f} "
                   f"{cells[1]:>24} {cells[2]:>24}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tortoiselab.analysis.fairness RUNS.parquet", file=sys.stderr)
        return 2
    print(format_table(fairness_table(pd.read_parquet(args[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
