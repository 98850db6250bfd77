"""The lab's typed requests (spec/requests.py): what the host writes is what
the guest reads, a bad request is refused with the field named, and a run's
page-load request carries what the guest was given before the models."""

import json

import pytest

from tests.conftest import write_yaml
from tortoiselab.guest import __main__ as guest
from tortoiselab.guest.modules import requested_algorithms
from tortoiselab.guest.tasks import TASKS
from tortoiselab.host import backends, batches, pageload
from tortoiselab.spec.experiment import expand, load
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.requests import (REQUEST_MODELS, CcCheckRequest, CommandRequest, LabRequest, LossResponseRequest,
                                       ModuleCheckRequest, PageLoadRequest, ProbeRequest, RequestError,
                                       read_request, task_name)

PATH = PathSpec(rtt_ms=100, loss_pct=2, loss_up_pct=0, rate_mbit=20, queue_pkts=50)
PLACED = {"backend": "uml", "clock": "virtual", "private_ovs": True, "modules_dir": "/m/modules-x"}

REQUESTS = [
    ProbeRequest(path=PATH, cc="hybla", switch="bridge", seed=9, measure={"bulk_seconds": 3, "loss_probes": 100},
                 module_params={"reno_beta": {"beta": "0.800"}}, **PLACED),
    CcCheckRequest(path=PATH, algorithms=["cubic", "dctcp"], seconds=1.0),
    LossResponseRequest(path=PATH, drop_nth=150, arms=[
        {"label": "reno_beta 0.7", "cc": "reno_beta", "params": {"beta": "0.700"}, "segments": 3000}]),
    ModuleCheckRequest(bad_params={"cubic_plus": {"n": "0"}}, backend="uml", clock="real"),
    CommandRequest(argv=["/v/bin/python", "-m", "tortoiselab.cli", "run", "e.yaml", "--backend", "native"],
                   timeout_s=300, seed=4, backend="uml", clock="real"),
    PageLoadRequest(path=PATH, seed=3, site_dir="/r/.lab/site", pki_dir="/r/.lab/pki/x", ro_paths=["/r/.lab"],
                    loads=[{"label": "a", "server": {"cc": "cubic_plus", "initcwnd_pkts": 3,
                                                     "module_params": {"cubic_plus": {"n": 2}}},
                            "client": {"page": "tiny.html", "loader": "nghttp", "seed": 3, "dns": "warm"}},
                           {"label": "b", "client": {"url": "https://dead.lab.test/feed.html", "timeout_s": 5}}]),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: r.task)
def test_every_request_round_trips_through_json(req):
    back = read_request(req.model_dump_json(indent=1))
    assert type(back) is type(req) and back == req
    assert json.loads(back.model_dump_json()) == json.loads(req.model_dump_json())


def test_one_model_and_one_guest_function_per_task():
    assert {task_name(m) for m in REQUEST_MODELS} == set(TASKS)
    assert all(issubclass(m, LabRequest) for m in REQUEST_MODELS)


@pytest.mark.parametrize("change,field", [
    (lambda d: d["loads"][0]["client"].update(colour="red"), "pageload.loads.0.client.colour"),
    (lambda d: d.update(seeed=1), "pageload.seeed"),
    (lambda d: d["loads"][1]["server"].update(initcwnd_pkts="many"), "pageload.loads.1.server.initcwnd_pkts"),
    (lambda d: d["path"].update(rtt_ms=-1), "pageload.path.rtt_ms"),
    (lambda d: d.update(clock="fast"), "pageload.clock"),
    (lambda d: d.update(task="pageloads"), "task"),
    (lambda d: d.update(pki_dir=None), "pageload: Value error, site_dir and pki_dir"),
])
def test_a_bad_request_is_refused_with_the_field_named(change, field):
    d = json.loads(REQUESTS[-1].model_dump_json())
    change(d)
    with pytest.raises(RequestError) as e:
        read_request(json.dumps(d))
    assert f"request.json: {field}" in str(e.value)


def test_the_guest_reports_a_bad_request_in_result_json(tmp_path):
    d = json.loads(REQUESTS[0].model_dump_json())
    d["measure"]["ping_count"] = "twenty"
    (tmp_path / "request.json").write_text(json.dumps(d))
    assert guest.main(["guest", str(tmp_path / "request.json")]) == 1
    res = json.loads((tmp_path / "result.json").read_text())
    assert res["ok"] is False and res["commands"] == [] and len(res["code_digest"]) == 64
    assert res["error"].startswith("RequestError: request.json: probe.measure.ping_count: Input should be a valid")


EXP = """
name: req
seed: 4
path: {rtt_ms: 100, loss_pct: 1, rate_mbit: 10}
server: {cc: cubic_plus, initcwnd_pkts: 10, module_params: {cubic_plus: {n: 2, beta: 0.8}}}
client: {url: /objects/100000.bin, loader: h2load}
sweep:
  client.cache_hit_ratio: [0, 0.3]
"""


def _former_request(run, site, pki) -> dict:
    """The page-load request as host/pageload.run_request built it by hand
    before the typed models, with what backends.run_task added."""
    c, s = run.config["client"], run.config["server"]
    client = {k: v for k, v in c.items() if v is not None}
    if c.get("url"):
        client["url"] = "https://www.lab.test/" + c["url"].lstrip("/")
    client["seed"] = run.seed
    return {"task": "pageload", "path": run.path.model_dump(), "seed": run.seed,
            "site_dir": str(site), "pki_dir": str(pki), "ro_paths": [str(site.parent)],
            "module_params": {alg: {k: str(v) for k, v in ps.items()} for alg, ps in s["module_params"].items()},
            "loads": [{"label": run.run_id, "server": s, "client": client}], **PLACED}


# keys the former request left out, with the default the guest then used
GUEST_DEFAULTS = {"switch": "ovs", "site_seed": 1, "dns": "cold", "tls_client": None, "url": None, "protocol": None,
                  "repeat_after_idle_s": None, "browser_fault": None,
                  "topology": None,  # None: wan, the one path the guest always built
                  # a side's host settings and the client's cache unit at their defaults: the models dump every
                  # field (the id form, spec/idform.py, leaves them out); the guest reads them as not given
                  "host": None, "tcp_rmem": None, "tcp_wmem": None, "tcp_window_scaling": None, "cache_unit": "asset",
                  "schedule": None}  # a run without a schedule (not our loader's page): no --schedule, as before


def _same_content(new: object, old: object, where: str = "") -> list[str]:
    if isinstance(new, dict) and isinstance(old, dict):
        out = [f"{where}.{k}: dropped" for k in old if k not in new]
        for k, v in new.items():
            if k in old:
                out += _same_content(v, old[k], f"{where}.{k}")
            elif GUEST_DEFAULTS.get(k, ...) != v:
                out.append(f"{where}.{k}: new, {v!r}")
        return out
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [d for i, (a, b) in enumerate(zip(new, old)) for d in _same_content(a, b, f"{where}[{i}]")]
    return [] if new == old and type(new) is type(old) else [f"{where}: {new!r} != {old!r}"]


def test_a_runs_pageload_request_validates_and_carries_what_it_did(tmp_path):
    runs = expand(load(write_yaml(tmp_path, EXP)))
    site, pki = tmp_path / ".lab" / "site", tmp_path / ".lab" / "pki" / "req"
    for run in runs:
        req = pageload.run_request([run], site, pki)
        assert read_request(req.model_dump_json()) == req
        ld = req.loads[0]
        assert ld.client.url == "https://www.lab.test/objects/100000.bin" and ld.client.seed == run.seed
        assert req.module_params == {"cubic_plus": {"n": "2", "beta": "0.8"}}
        assert requested_algorithms(req) == {"cubic_plus"}
        # a run alone: its load's seed and path are the request's, no spacing (the former request's meaning)
        assert (ld.seed, ld.path, req.load_spacing_s, req.settle_s) == (req.seed, req.path, 0.0, 0.0)
        # what reaches the guest: the former request's content, key for key
        sent = json.loads(req.model_copy(update=PLACED).model_dump_json())
        for k in ("load_spacing_s", "settle_s"):
            del sent[k]
        assert sent.pop("imported_dir") is None  # an imported site's (issue 55): never an experiment run's yet
        for k in ("seed", "path"):
            del sent["loads"][0][k]
        assert sent["loads"][0]["client"].pop("site") is None  # client.site (issue 55): none here
        diff = _same_content(sent, json.loads(json.dumps(_former_request(run, site, pki))))
        assert diff == [], "\n".join(diff)


def test_a_batch_request_carries_each_runs_own_path_and_seed(tmp_path):
    runs = expand(load(write_yaml(tmp_path, EXP)))
    assert len(runs) > 1
    site, pki = tmp_path / ".lab" / "site", tmp_path / ".lab" / "pki" / "req"
    req = pageload.run_request(runs, site, pki)
    assert read_request(req.model_dump_json()) == req
    assert (req.seed, req.path) == (runs[0].seed, runs[0].path)  # the boot's
    assert [(ld.label, ld.seed, ld.path, ld.client.seed) for ld in req.loads] == \
        [(r.run_id, r.seed, r.path, r.seed) for r in runs]
    assert req.load_spacing_s == pageload.LOAD_SPACING_S and req.settle_s > 60  # past TIME_WAIT


def test_batches_share_module_parameters_and_are_fixed_by_the_sweep(tmp_path):
    exp = write_yaml(tmp_path, """
name: b
repetitions: 5
server: {cc: reno_beta}
sweep:
  server.module_params: [{reno_beta: {beta: 0.5}}, {reno_beta: {beta: 0.7}}]
""")
    runs = expand(load(exp))
    assert len(runs) == 10
    one = batches.fixed_batches(runs, 8)
    assert sorted(len(b.runs) for b in one) == [5, 5]  # by parameters: a boot loads the module once
    assert all(len({pageload.boot_key(r) for r in b.runs}) == 1 for b in one)
    assert sorted(len(b.runs) for b in batches.fixed_batches(runs, 3)) == [2, 2, 3, 3]
    assert [len(b.runs) for b in batches.fixed_batches(runs, 1)] == [1] * 10
    with pytest.raises(ValueError, match="batch: must be at least 1"):
        batches.fixed_batches(runs, 0)
    mixed = list(one[0].runs[:1] + one[1].runs[:1])
    with pytest.raises(ValueError, match="module parameters"):
        pageload.run_request(mixed, tmp_path, tmp_path)
    # a batch's first loads are asked for as in the whole batch: the same spacing and read-only folders
    whole = pageload.run_request(list(one[0].runs), tmp_path, tmp_path)
    first = pageload.run_request(list(one[0].runs[:1]), tmp_path, tmp_path, members=one[0].runs)
    assert first.model_dump(exclude={"loads"}) == whole.model_dump(exclude={"loads"})
    assert first.loads == whole.loads[:1] and first.load_spacing_s > 0
    assert pageload.run_request(list(one[0].runs[:1]), tmp_path, tmp_path).load_spacing_s == 0  # a run alone
    with pytest.raises(ValueError, match="first runs"):
        pageload.run_request(list(one[0].runs[1:2]), tmp_path, tmp_path, members=one[0].runs)


def test_run_loads_sends_one_typed_request(tmp_path, monkeypatch):
    sent = {}
    monkeypatch.setattr(backends, "choose", lambda b, c, ccs: sent.setdefault("ccs", ccs) and
                        backends.BackendInfo("uml", "virtual", "/k/linux"))
    monkeypatch.setattr(backends, "run_task", lambda info, req, work, timeout_s: sent.update(req=req) or
                        {"task": {"loads": []}})
    pageload.run_loads([{"label": "x", "server": {"cc": "hybla"}, "client": {"page": "tiny.html"}}],
                       PATH, work=tmp_path, seed=8)
    req = sent["req"]
    assert sent["ccs"] == ["hybla"] and isinstance(req, PageLoadRequest) and req.seed == 8
    assert req.loads[0].client.target() == "https://www.lab.test/tiny.html"
    assert req.loads[0].server.initcwnd_pkts == 10  # ServerCfg's default, defined once


def test_one_load_checks_the_settings_by_the_experiments_models():
    ld = pageload.one_load("load", {"cc": "hybla", "initcwnd_pkts": 3}, {"url": "objects/1000000.bin"}, seed=4)
    assert (ld.server.cc, ld.server.initcwnd_pkts, ld.client.seed) == ("hybla", 3, 4)
    assert ld.client.target() == "https://www.lab.test/objects/1000000.bin"
    assert pageload.one_load("x", {}, {"url": "https://dead.lab.test/a"}, 1).client.url == "https://dead.lab.test/a"
    with pytest.raises(ValueError, match=r"^server\.initcwnd_pkts: .*\nserver\.protocol: "):
        pageload.one_load("x", {"initcwnd_pkts": 0, "protocol": "h3"}, {}, 1)
    with pytest.raises(ValueError, match=r"^client\.colour: Extra inputs"):
        pageload.one_load("x", {}, {"colour": "red"}, 1)


@pytest.mark.parametrize("fields,field", [
    ({"argv": []}, "command.argv"),
    ({"argv": ["true"], "timeout_s": 0}, "command.timeout_s"),
    ({"argv": ["true"], "timeout_s": 86400}, "command.timeout_s"),
])
def test_a_command_request_has_a_command_and_a_bounded_timeout(fields, field):
    with pytest.raises(RequestError, match=f"request.json: {field}"):
        read_request(json.dumps({"task": "command", **fields}))
