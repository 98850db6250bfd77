"""The coalescing study's reuse ratio counted in connections, as seed 001
counts it (studies/connections.py): a load's connections to the page's
other origins, reused or opened, pooled over loads."""

import math

from tortoiselab.studies.connections import reuse_in_connections, second_origin_connections

WWW, STATIC, CDN = "https://www.lab.test", "https://static.lab.test", "https://cdn.lab.test"


def test_a_coalesced_view_reuses_one_connection_and_a_separate_one_opens_one():
    assert second_origin_connections([{"origin": WWW, "origins": [WWW, STATIC]}]) == (1, 0)
    assert second_origin_connections([{"origin": WWW, "origins": [WWW]},
                                      {"origin": STATIC, "origins": [STATIC]}]) == (0, 1)


def test_a_view_from_cache_needs_no_connection_and_counts_nothing():
    assert second_origin_connections([{"origin": WWW, "origins": [WWW]}]) == (0, 0)
    assert second_origin_connections([]) == (0, 0)


def test_connections_not_origins_or_requests_are_counted():
    # static rode www's connection after a 421 retry opened one of its own: one connection opened
    assert second_origin_connections([{"origin": WWW, "origins": [WWW, STATIC]},
                                      {"origin": STATIC, "origins": [STATIC]}]) == (0, 1)
    # HTTP/1.1: three connections opened for static, one origin coalesced onto www
    h1 = [{"origin": WWW, "origins": [WWW, CDN]}] + [{"origin": STATIC, "origins": [STATIC]}] * 3
    assert second_origin_connections(h1) == (1, 3)
    # an entry without "origins" serves its own origin
    assert second_origin_connections([{"origin": WWW}, {"origin": STATIC}]) == (0, 1)


def test_pooled_over_loads_in_connections():
    loads = [(1, 0)] * 9 + [(0, 1)] + [(0, 0)] * 5  # 5 views from cache: no connection either way
    assert reuse_in_connections(loads) == (0.9, 10)
    assert reuse_in_connections(iter(loads)) == (0.9, 10)  # any iterable, read once
    ratio, n = reuse_in_connections([(0, 0)])
    assert math.isnan(ratio) and n == 0
