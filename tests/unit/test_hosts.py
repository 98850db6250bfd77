"""Hosts as explicit as links (spec/hostspec.py, docs/hosts.md): named
hosts with sources, the experiment's client and server host fields, the
region profile's host, bad values refused naming the field, and runs that
set no host keeping the ids they had before hosts could be set."""

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import write_yaml
from tortoiselab.spec import hostspec as H, idform
from tortoiselab.spec.experiment import ClientCfg, ExperimentError, ServerCfg, expand, load
from tortoiselab.spec.regionfiles import load_regions

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]

EXP = """
name: h
seed: 3
path: {region: us-desktop-2017}
server: {cc: cubic}
client: {page: tiny.html}
"""


def test_named_hosts_are_sourced_and_as_cited():
    hosts = H.load_hosts()
    assert {"desktop", "mobile", "mininet"} <= set(hosts)
    d, m, mn = hosts["desktop"].host, hosts["mobile"].host, hosts["mininet"].host
    # Linux's own since 4.20 (tcp_init), AOSP's LTE string, Mininet's fixLimits
    assert d.tcp_rmem == (4096, 131072, 6291456) and d.tcp_wmem == (4096, 16384, 4194304)
    assert (*m.tcp_rmem, *m.tcp_wmem) == (524288, 1048576, 2097152, 262144, 524288, 1048576)
    assert mn.tcp_rmem == mn.tcp_wmem == (10240, 87380, 16777216)
    for named in hosts.values():
        for k in H.SETTINGS:
            if getattr(named.host, k) is not None:
                assert named.sources[k].strip()


def test_mininet_host_is_what_mininet_writes():
    util = Path("/usr/lib/python3/dist-packages/mininet/util.py")
    if not util.exists():
        pytest.skip("Mininet is not installed")
    text = util.read_text()
    assert "sysctlTestAndSet( 'net.ipv4.tcp_rmem', '10240 87380 16777216' )" in text
    assert "sysctlTestAndSet( 'net.ipv4.tcp_wmem', '10240 87380 16777216' )" in text


def test_sysctls_as_the_kernel_prints_them_and_read_back():
    spec = H.HostSpec(tcp_rmem="4096 131072 6291456", tcp_window_scaling=False)
    assert spec.sysctls() == {"net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_window_scaling": "0"}
    back = H.read_back({"net.ipv4.tcp_rmem": "4096\t131072\t6291456", "net.ipv4.tcp_wmem": "",
                        "net.ipv4.tcp_window_scaling": "0"})
    assert back == spec
    assert not H.HostSpec().is_set() and H.HostSpec().sysctls() == {}


@pytest.mark.parametrize("value,says", [
    ([4096, 131072], "tcp_rmem"),
    ([4096, 1000000, 131072], "min 4096 <= default 1000000 <= max 131072"),
    ([1024, 131072, 6291456], "greater than or equal to 4096"),
    ("4096 lots 6291456", "three whole numbers"),
])
def test_bad_buffers_refused_naming_the_field(tmp_path, value, says):
    f = write_yaml(tmp_path, EXP.replace("client: {page: tiny.html}",
                                         f"client: {{page: tiny.html, tcp_rmem: {json.dumps(value)}}}"))
    with pytest.raises(ExperimentError) as err:
        load(f)
    assert "client.tcp_rmem" in str(err.value) and says in str(err.value)


def test_unknown_host_and_region_host_misuse_refused(tmp_path):
    for client, server, says in (("{host: laptop}", "{cc: cubic}", "client.host"),
                                 ("{host: desktop}", "{host: region}", "server.host"),
                                 ("{host: region}", "{cc: cubic}", None)):
        f = write_yaml(tmp_path, EXP.replace("client: {page: tiny.html}", f"client: {client}")
                       .replace("server: {cc: cubic}", f"server: {server}")
                       .replace("path: {region: us-desktop-2017}",
                                "path: {rtt_ms: 100}" if says is None else "path: {region: us-desktop-2017}"))
        with pytest.raises(ExperimentError) as err:
            load(f)
        assert (says or "client.host: region takes the host of the path's region profile") in str(err.value)


def test_named_host_fills_fields_not_given():
    c = ClientCfg(host="desktop", tcp_rmem=[8192, 65536, 1048576])
    assert c.tcp_rmem == (8192, 65536, 1048576) and c.tcp_wmem == (4096, 16384, 4194304)
    assert c.host_spec().sysctls()["net.ipv4.tcp_wmem"] == "4096 16384 4194304"
    # a dump read back is the same settings (the guest re-validates the load's)
    assert ClientCfg.model_validate(json.loads(json.dumps(c.model_dump()))) == c
    assert ServerCfg(host="mobile").host_spec() == H.named_host("mobile")


def test_unset_host_fields_are_left_out_of_the_id_form():
    """The models dump every field; the id form (spec/idform.py) leaves
    unset host fields out, so a run that sets none keeps its id; a set one
    stays in it."""
    for side, cfg in (("client", ClientCfg()), ("server", ServerCfg())):
        d = cfg.model_dump()
        assert {"host", *H.SETTINGS} <= set(d)
        assert not {"host", *H.SETTINGS} & set(idform.side_form(side, d))
        assert not cfg.host_spec().is_set()
    assert idform.side_form("client", ClientCfg(host="desktop").model_dump())["host"] == "desktop"
    assert "dns" not in idform.side_form("client", ClientCfg().model_dump())
    assert idform.side_form("client", ClientCfg(dns="warm").model_dump())["dns"] == "warm"


def test_region_host_applies_the_profiles_host(tmp_path):
    regions = load_regions()
    assert regions.profile("us-desktop-2017").host == "desktop"
    assert regions.profile("india-mobile-2017").host == "mobile"
    assert regions.profile("us-desktop-2017").background_load_pct == 10
    (plain,) = expand(load(write_yaml(tmp_path, EXP)))
    (run,) = expand(load(write_yaml(tmp_path, EXP.replace("{page: tiny.html}", "{page: tiny.html, host: region}"))))
    assert "host" not in plain.config["client"]  # the profile's host applies only when asked for
    assert run.config["client"]["host"] == "desktop" and run.config["client"]["tcp_rmem"] == (4096, 131072, 6291456)
    assert run.run_id != plain.run_id
    (named,) = expand(load(write_yaml(tmp_path, EXP.replace("{page: tiny.html}", "{page: tiny.html, host: desktop}"))))
    assert named.run_id == run.run_id  # the same configuration, the same run


def test_profile_without_host_refuses_region_host(tmp_path):
    f = write_yaml(tmp_path, EXP.replace("us-desktop-2017", "wpt-cable")
                   .replace("{page: tiny.html}", "{page: tiny.html, host: region}"))
    with pytest.raises(ExperimentError, match="'wpt-cable' names no host"):
        load(f)


def _digest(runs) -> str:
    return hashlib.sha256("".join(sorted(r.run_id + str(r.seed) for r in runs)).encode()).hexdigest()[:16] + \
        f" {len(runs)}"


REGIONS = """
name: regions
seed: 5
path: {region: india-desktop-2017}
client: {page: feed.html}
sweep:
  path.region: [%s]
"""


def test_run_ids_as_before_hosts(tmp_path):
    """The determinism test's sweep, quick.yaml and a run on every region
    profile (hosts and background loads attached to many of them) expand to
    the run ids and seeds the code before hosts gave them (computed with
    40dfb4f into tests/data/run-ids-before-hosts.json). All three load the
    feed with our loader, whose page runs carry client.schedule since issue
    51 (chromium by default, a new id): with schedule eager, the way those
    runs sent their requests, they keep the ids they had."""
    want = json.loads((DATA / "run-ids-before-hosts.json").read_text())
    from tests.integration.test_determinism import EXP as det  # noqa: PLC0415 - the lab test's own experiment

    def eager(text: str) -> Path:
        doc = yaml.safe_load(text)
        doc["client"] = {**doc.get("client", {}), "schedule": "eager"}
        return write_yaml(tmp_path, yaml.safe_dump(doc, sort_keys=False))

    assert sorted(r.run_id for r in expand(load(eager(det)))) == want["determinism"]
    assert _digest(expand(load(eager((REPO / "experiments" / "quick.yaml").read_text())))) == want["quick.yaml"]
    assert _digest(expand(load(REPO / "experiments" / "quick.yaml"))) != want["quick.yaml"]  # chromium: new ids
    runs = expand(load(eager(REGIONS % ", ".join(want["regions"]))))
    assert {r.point["path.region"]: r.run_id for r in runs} == want["regions"]
