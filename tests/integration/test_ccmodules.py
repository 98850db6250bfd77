"""Our congestion control modules in the lab kernel: they load and unload,
refuse bad parameters, and cut the window by what their formula says."""

import json
import subprocess

import pytest

from tests.conftest import TORTOISE
from tortoiselab.host.lossresponse import run_module_check

pytestmark = pytest.mark.lab


def test_modules_load_unload_and_refuse_bad_values(tmp_path, lab_kernel):
    r = run_module_check(work=tmp_path / "w")
    assert {"cubic_plus", "reno_beta"} <= set(r["available_cc"])
    for alg in ("cubic_plus", "reno_beta"):
        m = r["modules"][alg]
        assert m["listed_at_start"] and m["rmmod_rc"] == 0 and not m["listed_after_rmmod"]
        assert m["insmod_rc"] == 0 and m["listed_after_insmod"]
        for value, b in m["bad"].items():
            assert b["insmod_rc"] != 0 and not b["loaded_with_it"], (alg, value)
            assert b["sysfs"].startswith("refused") and b["value_kept"], (alg, value)
    assert r["modules"]["reno_beta"]["defaults"]["beta"] == "0.500"
    assert r["modules"]["cubic_plus"]["defaults"]["n"] == "6"
    assert set(r["modules"]["reno_beta"]["bad"]) == {"beta=0.099"}  # just below its lowest, 0.1
    log = "\n".join(r["kernel_log"])
    assert "beta" in log and "1.5" in log and "0.099" in log  # the module said what it refused


def test_one_loss_cuts_the_window_by_the_formula(tmp_path, lab_kernel):
    p = subprocess.run([*TORTOISE, "loss-response", "--backend", "uml", "--clock", "virtual", "--json",
                        "--work", str(tmp_path / "w")], capture_output=True, text=True, timeout=1800)
    assert p.stdout.strip().startswith("{"), p.stderr
    res = json.loads(p.stdout)
    from tortoiselab.host.lossresponse import format_rows
    print("\n" + format_rows(res["rows"]))
    # reno_beta over both readings of the seed's factor: beta 0.5-0.9 and 0.5-0.1
    assert {"reno_beta 0.1", "reno_beta 0.3", "reno_beta 0.5", "reno_beta 0.9"} <= {r["label"] for r in res["rows"]}
    for row in res["rows"]:
        assert row["drops"] == 1, row["label"]  # exactly one data segment dropped
        assert row["in_use"] == row["cc"]
        assert abs(row["ratio"] - row["expected"]) <= row["tol"], row
        if row["cc"] in ("reno", "reno_beta"):  # exact: max(cwnd * beta, 2) in the module's integers
            assert row["ssthresh_after"] == row["ssthresh_expected"], row
        assert row["ok"], row
        if "k_predicted_s" in row:  # CUBIC+ regrows along C(t-K)^3 + W_max
            assert abs(row["k_fit_s"] - row["k_predicted_s"]) <= max(0.25, 0.15 * row["k_predicted_s"]), row
    assert p.returncode == 0
