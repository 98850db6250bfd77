"""`tortoise loss-response`: each algorithm's reaction to exactly one loss,
measured from the kernel's cwnd, against what its formula says."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tortoiselab.host import backends
from tortoiselab.analysis.ccanalysis import cubic_k, find_loss_event, fit_k, rtt_aware_factor
from tortoiselab.spec.ccparams import beta_effective, check_params
from tortoiselab.analysis.parsers import parse_tc_filter_drops
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import LossArm, LossResponseRequest, ModuleCheckRequest

# A loss-free path far from full: 100 ms, 100 Mbit/s (BDP 826 frames, and as
# much queue), so the one deterministic drop is the only loss. The drop is
# data segment #150, the last of slow start's 4th flight (10+20+40+80): the
# sender detects it about one RTT later at a cwnd near 160, well below the
# path's capacity. (A route's ssthresh metric would have started congestion
# avoidance earlier, but Linux 6.12 takes it only from a saved tcp_metrics
# entry, which tcp_no_metrics_save=1 rules out.)
PATH = PathSpec(rtt_ms=100, rate_mbit=100, loss_pct=0)
DROP_NTH = 150
SEGMENTS_RATIO = 3000  # enough to see the reduction and the end of recovery
SEGMENTS_REGROWTH = 12000  # CUBIC+: ~7 s, well past K, for the fit

LINUX_CUBIC_BETA = 717 / 1024  # the stock module's fixed point for 0.7


@dataclass(frozen=True)
class Arm:
    label: str
    cc: str
    params: dict
    expected: float  # ssthresh / cwnd after the loss
    tol: float = 0.02
    beta_milli: int | None = None  # Reno-like arms: ssthresh is exactly max(cwnd * beta_milli // 1000, 2)


def reno_ssthresh(cwnd: int, beta_milli: int) -> int:
    """The ssthresh a Reno-like reduction sets, in segments: RFC 5681's
    max(FlightSize / 2, 2 segments) (eq. 4) with 1/2 replaced by beta, in
    the module's fixed point (kernel/modules/tcp_reno_beta.c: beta in
    thousandths, the product truncated); beta_milli 500 is Reno's halving."""
    return max(cwnd * beta_milli // 1000, 2)


def reno_beta_arm(beta: str) -> Arm:
    """Our reno_beta module at beta (a decimal string, as the module takes
    it), judged exactly: ssthresh = reno_ssthresh(cwnd before, beta)."""
    milli = round(float(beta) * 1000)
    return Arm(f"reno_beta {float(beta):g}", "reno_beta", {"beta": f"{milli / 1000:.3f}"}, milli / 1000,
               beta_milli=milli)


def default_arms() -> list[Arm]:
    """Every algorithm the lab's studies compare, ours with the parameters
    they sweep: reno_beta over both readings of the seed's reduction factor
    (beta 0.5-0.9, and 1 - beta 0.5-0.9, i.e. beta 0.5-0.1: 0.1 and 0.3
    beside 0.5, 0.7, 0.9; kernel/modules/README.md)."""
    cp = {"beta": "0.700", "rtt_aware": "0", "rtt_ref_ms": "100", "fast_convergence": "1"}
    return [
        Arm("reno", "reno", {}, 0.5, beta_milli=500),
        *(reno_beta_arm(b) for b in ("0.1", "0.3", "0.5", "0.7", "0.9")),
        Arm("cubic", "cubic", {}, LINUX_CUBIC_BETA),
        Arm("cubic_plus n=6", "cubic_plus", {**cp, "n": "6"}, beta_effective(0.7, 6)),
        Arm("cubic_plus n=2", "cubic_plus", {**cp, "n": "2"}, beta_effective(0.7, 2)),
        Arm("cubic_plus n=6 rtt-aware", "cubic_plus", {**cp, "n": "6", "rtt_aware": "1", "rtt_ref_ms": "50"},
            beta_effective(0.7, 6)),
        Arm("scalable", "scalable", {}, 0.875),
    ]


def predicted_k(arm: Arm, w_max: float, srtt_ms: float) -> float | None:
    if arm.cc != "cubic_plus":
        return None
    beta = beta_effective(float(arm.params["beta"]), int(arm.params["n"]))
    k = cubic_k(w_max, beta)
    if arm.params.get("rtt_aware") == "1":
        k *= rtt_aware_factor(srtt_ms, float(arm.params["rtt_ref_ms"]))
    return k


def analyze(arms: list[Arm], task: dict) -> list[dict]:
    """One row per arm: its loss event (analysis.ccanalysis.LossEvent), the
    drops the filter counted, and ok: exactly one drop, the arm's algorithm
    in use and the cut as its formula says (Reno-like arms: ssthresh exactly
    reno_ssthresh, in `ssthresh_expected`; others: the ratio within tol);
    CUBIC+ arms also the K predicted and fitted."""
    rows = []
    for arm, rec in zip(arms, task["arms"]):
        ev = find_loss_event(rec["samples"])
        drops = parse_tc_filter_drops(rec["filter_stats"])
        row = {"label": arm.label, "cc": arm.cc, "params": rec["params"], "expected": round(arm.expected, 4),
               "tol": arm.tol, "drops": drops, "samples": len(rec["samples"]), "in_use": rec["server_cc"]}
        if ev is None:
            row.update(ratio=None, ok=False, note="no multiplicative decrease found")
        else:
            row.update(ev.as_dict())
            if arm.beta_milli is None:
                cut_ok = abs(ev.ratio - arm.expected) <= arm.tol
            else:  # exact: the module's own integer result, the floor of 2 segments included
                row["ssthresh_expected"] = reno_ssthresh(ev.cwnd_before, arm.beta_milli)
                cut_ok = ev.ssthresh_after == row["ssthresh_expected"]
            row["ok"] = cut_ok and drops == 1 and rec["server_cc"] == arm.cc  # not a column
            kp = predicted_k(arm, ev.cwnd_before, ev.srtt_ms)
            if kp is not None:
                row["k_predicted_s"] = round(kp, 3)
                row.update(fit_k(rec["samples"], ev, ev.cwnd_before))
        rows.append(row)
    return rows


def lab_request(arms: list[Arm]) -> LossResponseRequest:
    """The loss-response task for these arms: CUBIC+ arms send enough for the K fit."""
    return LossResponseRequest(path=PATH, drop_nth=DROP_NTH, arms=[
        LossArm(label=a.label, cc=a.cc, params=a.params,
                segments=SEGMENTS_REGROWTH if a.cc == "cubic_plus" else SEGMENTS_RATIO) for a in arms])


def run(backend: str = "uml", clock: str = "virtual", work: Path | None = None,
        arms: list[Arm] | None = None, timeout_s: float = backends.LONG_TASK_TIMEOUT_S) -> tuple[list[dict], dict]:
    arms = arms or default_arms()
    for a in arms:
        check_params(a.cc, a.params, field=f"arm {a.label!r}")
    info = backends.choose(backend, clock, sorted({a.cc for a in arms}))
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-lossresp-"))
    result = backends.run_task(info, lab_request(arms), work, timeout_s=timeout_s)
    rows = analyze(arms, result["task"])
    meta = {"backend": info.backend, "clock": info.clock, "kernel_release": result["kernel_release"],
            "modules": result.get("modules", {}), "work": str(work), "uml_userspace": result.get("uml_userspace")}
    (work / "loss_response.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")
    return rows, meta


def format_rows(rows: list[dict]) -> str:
    head = (f"{'arm':<26} {'cwnd before':>11} {'ssthresh':>8} {'exact':>5} {'after/before':>12} {'expected':>9} "
            f"{'cwnd@recovered':>14}  {'drops':>5}  ok")
    out = [head, "-" * len(head)]
    for r in rows:
        ratio = f"{r['ratio']:.4f}" if r.get("ratio") is not None else "-"
        out.append(f"{r['label']:<26} {r.get('cwnd_before', '-')!s:>11} {r.get('ssthresh_after', '-')!s:>8} "
                   f"{r.get('ssthresh_expected', '-')!s:>5} {ratio:>12} {r['expected']:>9.4f} "
                   f"{r.get('cwnd_recovered', '-')!s:>14}  {r['drops']!s:>5}  {'yes' if r['ok'] else 'NO'}")
    ks = [r for r in rows if "k_predicted_s" in r]
    if ks:
        out += ["", f"{'CUBIC+ regrowth':<26} {'K predicted':>11} {'K fitted':>9} {'fit RMS (segs)':>15} {'points':>7}"]
        for r in ks:
            out.append(f"{r['label']:<26} {r['k_predicted_s']:>11.3f} {r['k_fit_s']:>9.3f} "
                       f"{r['rms_segments']:>15.3f} {r['points']:>7}")
    return "\n".join(out)


# values our modules must refuse (outside the bounds in spec/ccparams.py; reno_beta's just below its lowest, 0.1)
BAD_PARAMS = {"reno_beta": {"beta": "0.099"}, "cubic_plus": {"n": "0", "beta": "1.5"}}


def run_module_check(backend: str = "uml", clock: str = "virtual", work: Path | None = None,
                     bad_params: dict[str, dict[str, str]] | None = None,
                     timeout_s: float = backends.TASK_TIMEOUT_S) -> dict:
    """Load/unload our modules in the lab kernel and offer them bad values."""
    info = backends.choose(backend, clock, ["cubic"])
    work = work or Path(tempfile.mkdtemp(prefix="tortoise-modcheck-"))
    req = ModuleCheckRequest(bad_params=bad_params or BAD_PARAMS)
    result = backends.run_task(info, req, work, timeout_s=timeout_s)
    return {"available_cc": result["available_cc"], **result["task"]}
