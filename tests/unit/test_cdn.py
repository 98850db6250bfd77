"""The CDN set-up's pure pieces (spec/cdn.py, the dumbbell's cdn_rtt_ms,
guest/webtier.resolution, analysis/servedby.py, webroot's static objects)."""

import pytest

from tortoiselab.analysis.servedby import misplaced, served_by
from tortoiselab.spec import cdn
from tortoiselab.spec.pathspec import PathSpec
from tortoiselab.spec.topologies import TopologyCfg, parse_topology
from tortoiselab.spec.topology import TopologyError
from tortoiselab.web import pages

INDIA = PathSpec(rtt_ms=54, jitter_ms=2, loss_pct=0.5, rate_mbit=18.8, rate_up_mbit=5, queue_pkts=33)


def test_the_cdn_graph_puts_the_pop_behind_a_second_link_and_the_cdn_at_the_last_miles_end():
    g = parse_topology("dumbbell,2,cdn_rtt_ms=27").graph(web=True)
    assert [h.name for h in g.hosts[:3]] == ["client", "server", "dns"] and g.hosts[-1] == cdn.CDN
    assert g.wan == ("s1", "s2") and g.backhaul == ("s2", "s3")
    assert {("s3", "server"), ("s3", "dns"), ("s3", "xs"), ("s2", "cdn"), ("c2", "s1")} <= set(g.links)
    assert g.with_role("cdn") == ["cdn"]
    one = parse_topology("dumbbell,2").graph(web=True)  # without it: the dumbbell as it was
    assert one.backhaul is None and "cdn" not in {h.name for h in one.hosts} and ("s2", "server") in one.links


def test_the_path_splits_into_a_shared_last_mile_and_the_pop_leg():
    last, leg = cdn.legs(INDIA, 27)
    assert (last.rtt_ms, last.rate_mbit, last.loss_pct, last.jitter_ms, last.queue_pkts) == (27, 18.8, 0.5, 2, 33)
    assert (leg.rtt_ms, leg.loss_pct, leg.rate_mbit) == (27, 0, cdn.POP_LEG_RATE_MBIT)
    assert last.rtt_ms + leg.rtt_ms == INDIA.rtt_ms
    bdp = PathSpec(rtt_ms=54, loss_pct=0, rate_mbit=18.8)  # a queue of one BDP stays the whole RTT's
    assert cdn.legs(bdp, 27)[0].queue_pkts == bdp.bdp_pkts() > PathSpec(rtt_ms=27, rate_mbit=18.8).bdp_pkts()


@pytest.mark.parametrize("cdn_rtt, field", [(60, "more than the path's rtt_ms"), (3, "jitter")])
def test_a_path_the_cdn_cannot_split_is_refused_naming_the_field(cdn_rtt, field):
    with pytest.raises(TopologyError, match=f"topology.cdn_rtt_ms: .*{field}"):
        TopologyCfg(name="dumbbell", cdn_rtt_ms=cdn_rtt).apply(INDIA)


def test_bad_cdn_parameters_are_refused():
    with pytest.raises(TopologyError, match="topology.cdn_cc: unknown algorithm 'foo'"):
        parse_topology("dumbbell,cdn_rtt_ms=20,cdn_cc=foo")
    with pytest.raises(TopologyError, match="topology.cdn_rtt_ms: Input should be greater than 0"):
        parse_topology("dumbbell,cdn_rtt_ms=0")


def test_null_is_one_server_and_leaves_the_run_configuration_as_it_was():
    assert TopologyCfg(name="dumbbell", clients=1, cdn_rtt_ms=None).model_dump() == {"name": "dumbbell", "clients": 1}
    assert TopologyCfg(name="dumbbell", cdn_rtt_ms=None).params().legs(INDIA) == (INDIA, None)


def test_static_resolves_to_the_cdn_and_www_to_the_pop():
    from tortoiselab.guest.webtier import STATIC, WWW, resolution  # Mininet's import lives there

    for scenario in ("same-ip", "two-ip"):
        names = resolution(scenario, "10.0.0.2", cdn.cdn_ip())
        assert names[WWW] == "10.0.0.2" and names[STATIC] == "10.0.4.1"
        assert cdn.static_hosts(names, cdn.cdn_ip()) == [STATIC]
    assert resolution("same-ip", "10.0.0.2")[STATIC] == "10.0.0.2"  # one server: as before
    with pytest.raises(ValueError, match="unknown scenario"):
        resolution("three-ip", "10.0.0.2", cdn.cdn_ip())


def test_the_pages_static_objects_are_on_static_and_their_documents_on_www(tmp_path):
    site = pages.generate_site(tmp_path, seed=1)
    feed, app = site["pages"]["feed.html"], site["pages"]["app.html"]
    assert {o["host"] for o in feed["objects"] + app["objects"]} == {"static.lab.test"}
    assert feed["document"]["host"] == app["document"]["host"] == "www.lab.test"
    assert {o["kind"] for o in feed["objects"]} >= {"css", "js"} and len(feed["objects"]) == 46


def _entry(url, ip, body, conn):
    return {"request": {"url": url}, "response": {"bodySize": body}, "serverIPAddress": ip, "connection": conn}


def test_served_by_groups_the_hars_entries_by_the_host_that_answered():
    entries = [_entry("https://www.lab.test/feed.html", "10.0.0.2", 60000, "1"),
               _entry("https://static.lab.test/a.css", "10.0.4.1", 100, "2"),
               _entry("https://static.lab.test/b.js", "10.0.4.1", 50, "2"),
               {"request": {"url": "https://static.lab.test/c.png"}, "response": {"bodySize": 0}}]
    got = served_by(entries, {"10.0.0.2": "server", "10.0.4.1": "cdn"})
    assert got["server"] == {"requests": 1, "bytes": 60000, "hosts": ["www.lab.test"], "connections": 1}
    assert got["cdn"] == {"requests": 2, "bytes": 150, "hosts": ["static.lab.test"], "connections": 1}
    assert got["cache"]["requests"] == 1
    names = {"www.lab.test": "10.0.0.2", "static.lab.test": "10.0.4.1"}
    assert misplaced(entries, names) == []
    assert misplaced([_entry("https://static.lab.test/a.css", "10.0.0.2", 1, "1")], names) == [
        "https://static.lab.test/a.css"]
