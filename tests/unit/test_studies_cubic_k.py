"""The sensitivity of the lab's RTT-aware K (issue 39): the paper gives no
function for CUBIC+'s RTT-aware recovery time, so the lab's own,
f(s) = 2R / (R + s), is named as the lab's and each delay claim is read
again on the K arm alone at R = 25 and 400 ms. The runs are made up (pure
logic of the claims)."""

import json

import pandas as pd
import pytest

from tortoiselab.project import REPO_DIR as REPO
from tortoiselab.spec.experiment import expand, load
from tortoiselab.studies.claims import cubic_plus as C

ARMS = {C.CONTROL: {"n": 1}, C.BETA_ONLY: {"n": 6}, C.BETA_K: {"n": 6, "rtt_aware": 1},
        **{C.beta_k(r): {"n": 6, "rtt_aware": 1, "rtt_ref_ms": r} for r in C.K_REFS_MS}}


def _runs(throughput, reps=5):
    """Loss-free 1 MB h2load runs at RTT 20/100/200 ms: throughput(arm, rtt, rep) Mbit/s."""
    rows = []
    for arm, params in ARMS.items():
        for rtt in (20, 100, 200):
            for r in range(reps):
                point = {"server.cc+server.module_params": ["cubic_plus", {"cubic_plus": params}],
                         "path.rtt_ms": rtt, "path.loss_pct": 0}
                rows.append({"ok": True, "arm": arm, "client.url": C.OBJ_1M, "path.rtt_ms": rtt, "path.loss_pct": 0,
                             "server.initcwnd_pkts": 10, "repetition": r, "cond": json.dumps(point, sort_keys=True),
                             "throughput_mbit": float(throughput(arm, rtt, r))})
    return pd.DataFrame(rows)


def _claims():
    return {c.id.split(".", 1)[1]: c for c in C.CLAIMS}


def test_each_delay_claim_has_a_variant_per_reference_rtt():
    cs = _claims()
    for cid in ("delay-large-cubic-wins", "delay-small-close"):
        for r in C.K_REFS_MS:
            v = cs[f"{cid}-k-ref-{r}ms"]
            assert not v.primary and v.sentence == f"cubic_plus.{cid}" and f"R = {r} ms" in v.variant


def test_the_variant_reads_its_own_arm_alone():
    """Only the R = 25 ms arm is slower: its variant sees it, the primary
    reading (the better of beta only and K at R = 100 ms) and R = 400 do not."""
    def tput(arm, rtt, r):
        return 10.0 * (0.8 if arm == C.beta_k(25) else 1.0) * (100 / rtt)
    df = _runs(tput)
    cs = _claims()
    slow = cs["delay-large-cubic-wins-k-ref-25ms"].measure(df)
    assert slow.value == pytest.approx(-20, abs=0.01) and C.beta_k(25) in slow.detail
    assert cs["delay-large-cubic-wins-k-ref-400ms"].measure(df).value == pytest.approx(0, abs=0.01)
    primary = cs["delay-large-cubic-wins"].measure(df)
    assert primary.value == pytest.approx(0, abs=0.01) and C.beta_k(25) not in primary.detail


def test_the_reduced_grid_runs_the_k_arms_on_every_delay_condition():
    runs = expand(load(REPO / "experiments" / "cubic_plus.yaml", grid="reduced"))
    params = [r.config["server"]["module_params"].get("cubic_plus", {}) for r in runs]
    for ref in C.K_REFS_MS:
        rtts = {r.config["path"]["rtt_ms"] for r, p in zip(runs, params) if p.get("rtt_ref_ms") == ref}
        assert rtts == {20, 100, 200}
