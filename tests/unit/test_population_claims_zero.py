"""A population claim with a time of 0 for one user (content_download_ms
when the whole response came in the loader's first read; seen in
tortoise-population@powered, run 660472e34ebf): that user is left out of
the log-ratio test and named, not a crash of the whole report."""

import numpy as np
import pandas as pd

from tortoiselab.studies.population import population_change


def _users(n: int, zero_at: int | None) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(1)
    for u in range(n):
        base = float(rng.lognormal(6, 0.3))
        for cc, f in (("htcp", 1.0), ("hybla", 0.95)):
            v = 0.0 if (u == zero_at and cc == "hybla") else base * f
            rows.append({"run_id": f"{cc}{u}", "ok": True, "server.cc": cc, "repetition": 0, "content_download_ms": v,
                         "population.market": "china-desktop-2017", "population.user": u, "population.warm": False,
                         "path.rtt_ms": 100.0, "cond": "{}"})
    return pd.DataFrame(rows)


def test_a_user_with_a_time_of_0_is_left_out_and_named():
    m = population_change(_users(20, zero_at=7), "content_download_ms", "server.cc", "htcp", "hybla")
    assert m.n_control == m.n_arm == 19
    assert "1 users left out (content_download_ms of 0 in either arm" in m.detail
    whole = population_change(_users(20, zero_at=None), "content_download_ms", "server.cc", "htcp", "hybla")
    assert whole.n_control == 20 and "of 0" not in whole.detail
