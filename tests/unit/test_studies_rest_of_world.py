"""The Tortoise's rest-of-world sentence as the seed names it (issue 39):
Hybla's PLT change in Singapore and South America judged against its change
in the emerging markets (India, China), not against a fixed range. The runs
are made up (pure logic of the claim and of measure.change_of_change)."""

import json

import numpy as np
import pandas as pd
import pytest

from tortoiselab.host.columns import topology_cells
from tortoiselab.studies.claims import tortoise as T
from tortoiselab.studies.measure import change_of_change
from tortoiselab.studies.model import NoData

MOBILE = ("india-mobile-2017", "china-mobile-2016", "singapore-mobile-2018", "sa-cellular-2017")
CDN = topology_cells({"name": "dumbbell", "cdn_rtt_ms": 20, "clients": 1})


def _runs(gain: dict[str, float], reps: int = 12, page: str = "app.html") -> pd.DataFrame:
    """htcp and hybla runs per region: control 2 s x (1 + 2 % x repetition
    noise), hybla the control x (1 + gain[region])."""
    rng = np.random.default_rng(7)
    rows = []
    for region, g in gain.items():
        for r in range(reps):
            base = 2000.0 * (1 + 0.2 * rng.random())
            for cc in ("htcp", "hybla"):
                point = {"server.cc": cc, "path.region": region, "client.page": page}
                v = base * (1 + g + 0.01 * rng.standard_normal()) if cc == "hybla" else base
                rows.append({"ok": True, "server.cc": cc, "path.region": region, "client.page": page,
                             "repetition": r, "cond": json.dumps(point, sort_keys=True), "plt_ms": v,
                             **CDN})  # the primary set-up (a CDN)
    return pd.DataFrame(rows)


def _rest_claim(suffix=""):
    return next(c for c in T.CLAIMS if c.id == f"tortoise.rest-of-world{suffix}")


def test_a_smaller_gain_abroad_than_in_the_emerging_markets_agrees():
    df = _runs({"india-mobile-2017": -0.20, "china-mobile-2016": -0.20,
                "singapore-mobile-2018": -0.02, "sa-cellular-2017": -0.02})
    m = _rest_claim().measure(df)
    assert m.statistic == "ratio-groups" and m.n_control == 24 and m.n_arm == 24
    assert m.value == pytest.approx(100 * (0.98 / 0.80 - 1), abs=3)
    assert m.low > 0  # the interval excludes no difference on the claimed side
    assert _rest_claim().judge(m)[0] == "agree"


def test_the_same_gain_everywhere_does_not_agree():
    df = _runs({r: -0.10 for r in MOBILE})
    m = _rest_claim().measure(df)
    assert m.low < 0 < m.high
    assert _rest_claim().judge(m)[0] != "agree"


def test_a_larger_gain_abroad_disagrees():
    df = _runs({"india-mobile-2017": -0.02, "china-mobile-2016": -0.02,
                "singapore-mobile-2018": -0.20, "sa-cellular-2017": -0.20})
    m = _rest_claim().measure(df)
    assert m.high < 0
    assert _rest_claim().judge(m)[0] == "disagree"


def test_the_rest_of_world_is_the_seeds_not_us_and_germany():
    """US desktop and Germany mobile runs alone give the primary reading no
    data (they are its variant's), and the variant reads them."""
    df = pd.concat([_runs({"us-desktop-2017": -0.01, "india-desktop-2017": -0.1}, page="feed.html"),
                    _runs({"germany-mobile-2018": -0.01, "india-mobile-2017": -0.1, "china-mobile-2016": -0.1})])
    with pytest.raises(NoData, match="other set"):
        _rest_claim().measure(df)
    m = _rest_claim("-other-markets").measure(df)
    assert m.n_arm == 24 and m.n_control == 36 and m.value > 0


def test_every_pair_identical_is_a_tie_by_construction():
    df = _runs({r: 0.0 for r in MOBILE})
    df.loc[df["server.cc"] == "hybla", "plt_ms"] = df.loc[df["server.cc"] == "htcp", "plt_ms"].to_numpy()
    m = change_of_change(df, "plt_ms", "server.cc", "htcp", "hybla", base={"path.region": list(MOBILE[:2])},
                         other={"path.region": list(MOBILE[2:])})
    assert m.tie


def _improves(suffix=""):
    return next(c for c in T.CLAIMS if c.id == f"tortoise.rest-of-world-improves{suffix}")


def test_singapore_and_south_america_must_each_improve():
    """The seed's "Other geographical areas where we observed improvements
    were in Singapore and South America" (left out before issue 51): one
    row, Hybla's p90 PLT against H-TCP's in each, every part must hold."""
    from tortoiselab.studies.registry import judge_claim
    c = _improves()
    assert c.primary and c.sentence == c.id
    both = c.measure(_runs({"singapore-mobile-2018": -0.10, "sa-cellular-2017": -0.08}))
    assert {name for name, _ in both.parts} == {"singapore", "sa"}
    assert judge_claim(c, both).verdict == "agree"
    # both slower (the lab's +2.2 %, issue 51, made +5 % to be significant at 12 pairs): one part significantly
    # the other way refutes the row
    slower = c.measure(_runs({"singapore-mobile-2018": 0.05, "sa-cellular-2017": 0.05}))
    v = judge_claim(c, slower)
    assert v.verdict == "disagree" and "the other way" in v.why, (v.verdict, v.why)
    one = c.measure(_runs({"singapore-mobile-2018": -0.10, "sa-cellular-2017": 0.05}))
    assert judge_claim(c, one).verdict == "disagree"
