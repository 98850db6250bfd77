"""Issue 39, item 6: populations that decide a p90. What a market marks as
an assumption (`assumed`), a varied market (population.vary) drawn from the
same uniforms as the market itself, the one-at-a-time settings
(spec/population_oat.py), the experiments' sensitivity grids, the page each
population claim selects, the plan in users per market (studies/plan.py)
and the OAT table (studies/population_sensitivity.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tortoiselab.spec import population as P
from tortoiselab.spec import population_oat as O
from tortoiselab.spec.experiment import ExperimentError, expand, load
from tortoiselab.studies import plan as PL
from tortoiselab.studies import population_sensitivity as PS
from tortoiselab.studies.registry import STUDIES

REPO = Path(__file__).resolve().parents[2]
CLAIMS = {c.id: c for s in STUDIES.values() for c in s.claims}


def _market(name="india-mobile-2017"):
    return P.load_populations().markets[name]


# --- what is assumed -------------------------------------------------------------------------


def test_a_sourced_distribution_with_an_assumption_must_name_the_assumed_numbers():
    base = {"median": 54, "spread": 2.0, "min": 5, "max": 1000, "source": "a path", "assumption": "the spread"}
    with pytest.raises(ValueError, match="assumed: a source and an assumption"):
        P.Dist(**base)
    with pytest.raises(ValueError, match="assumed: p90"):
        P.Dist(**base, assumed=("p90",))  # not a number this distribution sets
    assert P.Dist(**base, assumed=("spread",)).assumed_fields() == ("spread",)
    assert P.Dist(fixed=3, assumption="a guess").assumed_fields() == ("fixed",)
    assert P.Dist(fixed=3, source="a paper").assumed_fields() == ()
    with pytest.raises(ValueError, match="give assumption"):
        P.Dist(fixed=3, source="a paper", assumed=("fixed",))


def test_the_shipped_files_assumptions_are_the_ones_the_sensitivity_moves():
    keys = [k for k, _, _ in O.assumed_numbers(_market())]
    # India mobile: the median RTT, the mean speed, the loss p90 (Pantheon's 4.77 %) and the uplink's median
    # (Ookla) have sources; their spreads, the loss-free share, jitter, buffer, bursts and warm loads do not
    assert keys == ["rtt_ms.spread", "jitter_ms.fixed", "rate_mbit.spread", "rate_up_mbit.spread",
                    "loss_pct.zero_share", "loss_pct.median", "bursty_share.value", "loss_burst_pkts.fixed",
                    "queue_ms.fixed", "warm_share.value", "idle_s.median", "idle_s.p90"]
    assert "queue_ms.fixed" not in [k for k, _, _ in O.assumed_numbers(_market("china-mobile-2016"))]  # Pantheon's


# --- a varied market ---------------------------------------------------------------------------


def test_vary_changes_one_number_and_names_a_bad_key():
    m = P.vary_market(_market(), {"rate_mbit.spread": 2, "warm_share.value": 0.6})
    assert m.rate_mbit.spread == 2 and m.warm_share.value == 0.6 and m.rtt_ms == _market().rtt_ms
    with pytest.raises(P.PopulationError, match=r"population\.vary\.rate_mbit\.foo"):
        P.vary_market(_market(), {"rate_mbit.foo": 1})
    with pytest.raises(P.PopulationError, match=r"population\.vary\.rtt_ms\.spread"):
        P.vary_market(_market(), {"rtt_ms.spread": 0.5})  # a spread is above 1
    with pytest.raises(P.PopulationError, match="centre is mean"):
        P.vary_market(_market(), {"rate_mbit.median": 3})
    us = P.vary_market(_market("us-mobile-2017"), {"rtt_ms.spread": 3})  # given as p90 in the file
    assert us.rtt_ms.p90 is None and us.rtt_ms.spread == 3


def test_a_varied_market_moves_only_what_its_change_moves():
    base = P.draw_users("india-mobile-2017", 40, seed=1)
    warm = P.draw_users("india-mobile-2017", 40, seed=1, vary={"warm_share.value": 0.6})
    assert [u.path for u in warm] == [u.path for u in base]  # the same uniforms: the paths stay
    flipped = [i for i in range(40) if warm[i].warm != base[i].warm]
    assert flipped and all(warm[i].warm for i in flipped)  # more warm users, none fewer
    wide = P.draw_users("india-mobile-2017", 40, seed=1, vary={"rate_mbit.spread": 4.5})
    assert [u.path.rtt_ms for u in wide] == [u.path.rtt_ms for u in base]
    assert max(u.path.rate_mbit for u in wide) > max(u.path.rate_mbit for u in base)
    assert "vary" not in base[0].record() and wide[0].record()["vary"] == "rate_mbit.spread=4.5"


def test_a_varied_population_has_its_own_run_ids_and_the_unvaried_keeps_them():
    grid = load(REPO / "experiments" / "tortoise-population.yaml", grid="sensitivity")
    reduced = {r.run_id for r in expand(load(REPO / "experiments" / "tortoise-population.yaml", grid="reduced"))}
    runs = expand(grid)
    base = [r for r in runs if "vary" not in r.config["population"]]
    assert len(base) == 36 and {r.run_id for r in base} <= reduced  # --reuse-from reduced takes them
    assert len({r.run_id for r in runs}) == len(runs)


def test_an_experiment_with_a_bad_vary_is_refused_before_it_runs(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({"name": "e", "seed": 1, "server": {"cc": "cubic"},
                                 "population": {"market": "india-mobile-2017", "users": 2,
                                                "vary": {"loss_pct.zero_share": 1.5}}}))
    with pytest.raises(ExperimentError, match="vary"):
        expand(load(f))


# --- the one-at-a-time settings ------------------------------------------------------------------


@pytest.mark.parametrize("field, base, median, want", [
    ("zero_share", 0.8, None, (0.6, 0.9)),    # the lossy 20 % doubled and halved
    ("zero_share", 0.2, None, (0.0, 0.6)),
    ("spread", 3.0, None, (2.0, 4.5)),
    ("spread", 1.5, None, (1.1, 2.25)),       # never narrower than MIN_SPREAD
    ("p90", 1.0, 0.1, (0.6667, 1.5)),         # p90 / median 10 -> 6.67 and 15
    ("value", 0.3, None, (0.15, 0.6)),
    ("value", 0.6, None, (0.3, 1.0)),         # a share at most 1
    ("fixed", 300.0, None, (150.0, 600.0)),
])
def test_moves_follow_their_rule(field, base, median, want):
    assert O.moves(field, base, median) == pytest.approx(want)


def test_every_setting_is_one_assumed_number_low_and_high_and_valid():
    for name, m in P.load_populations().markets.items():
        settings, skipped = O.oat_settings(name, m)
        assert not skipped, skipped
        keys = [k for k, _, _ in O.assumed_numbers(m)]
        assert [s.key for s in settings] == [k for k in keys for _ in O.LEVELS]
        for s in settings:
            assert (s.value < s.base) == (s.level == "low") and s.value != s.base
            P.vary_market(m, s.vary())


@pytest.mark.parametrize("f, pages", [("tortoise-population", {"india-mobile-2017": "app.html"}),
                                      ("coalescing-population", {"india-desktop-2017": "feed.html"})])
def test_the_sensitivity_grids_are_the_oat_settings_now(f, pages):
    """An edited populations.yaml moves the settings: regenerate the grid
    (spec/population_oat.sweep_values) and run it again."""
    grids = yaml.safe_load((REPO / "experiments" / f"{f}.yaml").read_text())["grids"]
    got = grids["sensitivity"]["sweep"]["population.market+client.page+population.vary"]
    assert got == O.sweep_values(P.load_populations().markets, pages)
    # the base setting's users are the reduced grid's first ones (the same runs)
    assert grids["sensitivity"]["population"]["users"] <= grids["reduced"]["population"]["users"]


# --- the page each population claim loads --------------------------------------------------------


def test_population_experiments_load_the_pages_of_the_single_path_claims():
    runs = expand(load(REPO / "experiments" / "tortoise-population.yaml", grid="reduced"))
    pages = {(r.config["population"]["market"], r.config["client"]["page"]) for r in runs}
    assert pages == {("india-desktop-2017", "base.html"), ("india-desktop-2017", "feed.html"),
                     ("china-desktop-2017", "base.html"), ("india-mobile-2017", "app.html"),
                     ("china-mobile-2016", "app.html")}
    arms = {(r.config["client"]["page"], r.config["server"]["cc"]) for r in runs}
    assert ("feed.html", "scalable") not in arms and ("app.html", "yeah") not in arms
    assert ("base.html", "yeah") in arms and len(runs) == 18 * 14


def _frame(market: str, pages: dict[str, float], users: int = 12) -> pd.DataFrame:
    """Runs of both arms per page: hybla at `pages[page]` times htcp."""
    rows = []
    for page, factor in pages.items():
        for arm in ("htcp", "hybla"):
            for i in range(users):
                v = (1000.0 + 37 * i) * (factor if arm == "hybla" else 1.0)
                point = {"population.market+client.page": [market, page], "server.cc": arm, "population.user": i}
                rows.append({"server.cc": arm, "arm": arm, "ok": True, "plt_ms": v, "content_download_ms": v,
                             "repetition": 0, "cond": json.dumps(point), "path.rtt_ms": 80.0, "client.page": page,
                             "population.market": market, "population.user": i, "population.warm": False,
                             "run_dir": ""})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("cid, market, page", [
    ("tortoise.india-mobile-plt-users", "india-mobile-2017", "app.html"),
    ("tortoise.china-mobile-plt-users-groups", "china-mobile-2016", "app.html"),
    ("tortoise.india-desktop-cdt-users", "india-desktop-2017", "base.html"),
    ("tortoise.india-desktop-plt-users", "india-desktop-2017", "feed.html"),
    ("coalescing.gain-india-users", "india-desktop-2017", "feed.html"),
])
def test_each_population_claim_reads_its_own_page(cid, market, page):
    others = {p: 1.5 for p in ("app.html", "base.html", "feed.html") if p != page}
    df = _frame(market, {page: 0.8, **others})
    if cid.startswith("coalescing"):
        df = df.assign(**{"client.coalescing": df["server.cc"].eq("hybla")})
        df["cond"] = [c.replace('"server.cc"', '"client.coalescing"') for c in df["cond"]]
    m = CLAIMS[cid].measure(df)
    assert m.value == pytest.approx(-20, abs=1e-6) and m.n == 12
    assert page.split(".")[0] in CLAIMS[cid].metric


# --- the plan in users per market -----------------------------------------------------------------


def test_the_plan_of_a_population_asks_for_users_per_market():
    rows = [PL.ClaimPlan("a", effect="-5 %", pairs=40, pairs_upper=60),
            PL.ClaimPlan("b", effect="-5 %", pairs=90, pairs_upper=120)]
    assert PL.users_needed(rows, 200) == (120, "")
    users, note = PL.users_needed(rows, 100)
    assert users == 100 and "b would need up to 120" in note
    far = rows + [PL.ClaimPlan("c", effect="-2 %", note="more than 400 pairs")]
    users, note = PL.users_needed(far, 150)
    assert users == 150 and "out of reach within 400 users: c" in note
    assert PL.users_needed([PL.ClaimPlan("d")], 100)[0] is None
    info = {"file": REPO / "experiments" / "tortoise-population.yaml", "grid": "reduced", "users": 18}
    block = yaml.safe_load(PL.powered_grid(info, 120))["powered"]
    assert block["population"]["users"] == 120 and "repetitions" not in block
    assert block["sweep"] == yaml.safe_load(info["file"].read_text())["grids"]["reduced"]["sweep"]


def test_the_cost_here_and_through_slurm():
    line = PL.cost_line(3600, 2.0, jobs=2, nodes=10)
    assert "1.0 h on this machine with --jobs 2 (3600 runs/hour)" in line
    # 3600 runs x 2 s / 10 = 720 s, plus 1000 tasks (slurm.MAX_TASKS) / 10 at a time x 5.2 s = 520 s: 20.7 min
    assert "20.7 min through the Slurm executor with 10 array tasks at once" in line


# --- the OAT table ----------------------------------------------------------------------------------


def test_oat_rows_judge_each_setting_and_flag_a_moved_label():
    c = CLAIMS["tortoise.india-mobile-plt-users"]
    base = _frame("india-mobile-2017", {"app.html": 1.0}, users=30).assign(**{"population.vary": None})
    fast = _frame("india-mobile-2017", {"app.html": 0.5}, users=30).assign(**{"population.vary": "warm_share.value=0.6"})
    rows = PS.oat_rows(c, pd.concat([base, fast], ignore_index=True), "india-mobile-2017", family=1)
    assert [r.setting for r in rows] == ["base", "warm_share.value=0.6"]
    assert rows[0].verdict == "not testable here" and not rows[0].moved  # every pair identical: a tie
    assert rows[1].value == pytest.approx(-50) and rows[1].low < -50 < rows[1].high
    assert rows[1].level == "high" and rows[1].base_value == 0.3 and rows[1].moved
    assert rows[1].verdict == "larger than claimed"
    table = PS.format_rows(rows)
    assert "| warm_share.value=0.6 | high | 0.3 | -50.0 %" in table and "**moved**" in table
    assert PS.study_family("tortoise") >= 5 and not math.isnan(rows[1].p_value)


def test_settings_come_base_first_then_in_the_oat_order():
    df = pd.DataFrame({"population.vary": ["b=1", None, "z=2", "a=3", "b=1"]})
    assert PS.settings_of(df, ["z=2", "b=1"]) == ["base", "z=2", "b=1", "a=3"]
