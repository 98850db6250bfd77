"""Load options and the CLI: bad values named by their option, exit codes,
both output files written on every outcome (no network: these loads stop
before connecting)."""

import json

import pytest

from tortoiselab.client import LoadOptions, OptionError, load_page_sync, validate_har
from tortoiselab.client.__main__ import main
from tortoiselab.client.options import parse_dns_server, parse_origin_protocol_args, parse_resolve_args


URL = "https://www.lab.test/feed.html"


@pytest.mark.parametrize("kw,field,words", [
    ({"url": "ftp://x/"}, "url", "not an http(s) URL"),
    ({"url": "https://"}, "url", "not an http(s) URL"),
    ({"url": "http://www.lab.test/"}, "url", "needs https://"),
    ({"protocol": "h3"}, "protocol", "'h3' is not one of h2, h1"),
    ({"tls_version": "1.1"}, "tls_version", "not one of 1.2, 1.3, any"),
    ({"cache_hit_ratio": 1.5}, "cache_hit_ratio", "must be in [0, 1], got 1.5"),
    ({"cache_hit_ratio": float("nan")}, "cache_hit_ratio", "finite"),
    ({"cache_hit_ratio": "0.5"}, "cache_hit_ratio", "must be a number"),
    ({"seed": 1.5}, "seed", "integer"),
    ({"timeout_s": 0}, "timeout_s", "must be in (0, 86400]"),
    ({"connect_timeout_s": -1}, "connect_timeout_s", "(0, 86400]"),
    ({"request_timeout_s": 0}, "request_timeout_s", "(0, 86400]"),
    ({"max_h1_connections": 0}, "max_h1_connections", "[1, 64]"),
    ({"coalescing": "yes"}, "coalescing", "true or false"),
    ({"resolve": {"www.lab.test": "10.0.0.300"}}, "resolve", "not an IP address"),
    ({"resolve": {"www.lab.test": []}}, "resolve", "no address"),
    ({"resolve": ["www.lab.test"]}, "resolve", "mapping"),
    ({"dns_server": "dns.lab.test"}, "dns_server", "not an IP address"),
    ({"dns_server": "10.0.0.53:99999"}, "dns_server", "bad port"),
    ({"ca_file": "/nonexistent/ca.pem"}, "ca_file", "is not a file"),
    ({"origin_protocols": {"legacy.shop.test": "h1"}}, "origin_protocols", "is not an origin"),
    ({"origin_protocols": {"https://a.test/x.js": "h1"}}, "origin_protocols", "is not an origin"),
    ({"origin_protocols": {"https://a.test": "http/1.1"}}, "origin_protocols", "not one of h2, h1"),
    ({"origin_protocols": {"http://a.test": "h2"}}, "origin_protocols", "needs https://"),
    ({"origin_protocols": [("https://a.test", "h1")]}, "origin_protocols", "mapping"),
])
def test_bad_options_name_the_field(kw, field, words):
    with pytest.raises(OptionError) as e:
        LoadOptions(**{"url": URL, **kw})
    assert e.value.field == field
    assert words in str(e.value)


def test_option_normalisation():
    o = LoadOptions(URL, resolve={"WWW.lab.test.": "10.0.0.2", "static.lab.test": ["10.0.0.2", "10.0.0.3"]})
    assert o.resolve == {"www.lab.test": ["10.0.0.2"], "static.lab.test": ["10.0.0.2", "10.0.0.3"]}
    assert o.cache_hit_ratio == 0.0 and isinstance(o.timeout_s, float)
    assert parse_resolve_args(["a.test:10.0.0.1", "a.test:10.0.0.2", "b.test:::1"]) == \
        {"a.test": ["10.0.0.1", "10.0.0.2"], "b.test": ["::1"]}
    assert parse_dns_server("10.0.0.53") == ("10.0.0.53", 53)
    assert parse_dns_server("127.0.0.1:5353") == ("127.0.0.1", 5353)
    with pytest.raises(OptionError, match="expected HOST:IP"):
        parse_resolve_args(["www.lab.test"])


def test_origin_protocols_are_origins_as_the_loader_writes_them():
    assert parse_origin_protocol_args(["https://Legacy.shop.test:443=h1", "http://ads.test:8080=h1",
                                       "https://www.shop.test=h2"]) == \
        {"https://legacy.shop.test": "h1", "http://ads.test:8080": "h1", "https://www.shop.test": "h2"}
    with pytest.raises(OptionError, match="expected ORIGIN=h2|h1"):
        parse_origin_protocol_args(["https://legacy.shop.test"])
    # a page of one protocol records the settings it did before
    assert "origin_protocols" not in LoadOptions(URL).as_dict()
    assert LoadOptions(URL, origin_protocols={"https://a.test": "h1"}).as_dict()["origin_protocols"] == \
        {"https://a.test": "h1"}


def _cli(tmp_path, *args):
    har, summ = tmp_path / "out" / "p.har", tmp_path / "out" / "s.json"
    rc = main(list(args) + ["--har", str(har), "--summary", str(summ)])
    return rc, (json.loads(har.read_text()) if har.exists() else None), \
        (json.loads(summ.read_text()) if summ.exists() else None)


@pytest.mark.parametrize("args,words", [
    (["--cache-hit-ratio", "2"], "--cache-hit-ratio: must be in [0, 1], got 2"),
    (["--cache-hit-ratio", "lots"], "argument --cache-hit-ratio: invalid float value: 'lots'"),
    (["--resolve", "www.lab.test"], "--resolve: 'www.lab.test': expected HOST:IP"),
    (["--resolve", "www.lab.test:10.0.0.256"], "--resolve: www.lab.test: '10.0.0.256' is not an IP address"),
    (["--protocol", "h3"], "--protocol: 'h3' is not one of h2, h1"),
    (["--tls", "1.0"], "--tls: '1.0' is not one of 1.2, 1.3, any"),
    (["--dns-server", "nameserver"], "--dns-server: 'nameserver' is not an IP address"),
    (["--timeout", "-3"], "--timeout: must be in (0, 86400], got -3"),
    (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_cli_bad_arguments_exit_2_and_still_write_both_files(tmp_path, ca_pem, capsys, args, words):
    rc, har, summ = _cli(tmp_path, URL, "--ca", ca_pem, *args)
    assert rc == 2
    assert words in capsys.readouterr().err
    assert words in summ["error"] and summ["ok"] is False
    assert validate_har(har) == []


def test_cli_missing_required_options(tmp_path, capsys):
    rc, har, summ = _cli(tmp_path, URL)
    assert rc == 2
    assert "the following arguments are required: --ca" in capsys.readouterr().err
    assert summ["url"] == URL and har["log"]["entries"] == []
    assert main([URL, "--ca", "x"]) == 2  # nowhere to write: message only
    assert "--har" in capsys.readouterr().err


def test_cli_missing_ca_file(tmp_path, capsys):
    rc, _, summ = _cli(tmp_path, URL, "--ca", str(tmp_path / "nope.pem"))
    assert rc == 2 and "--ca: " in capsys.readouterr().err and "is not a file" in summ["error"]


def test_cli_unknown_host_is_a_failed_load(tmp_path, ca_pem, capsys):
    rc, har, summ = _cli(tmp_path, URL, "--ca", ca_pem, "--resolve", "static.lab.test:127.0.0.1",
                         "--no-coalescing", "--seed", "7", "--cache-hit-ratio", "0.5")
    assert rc == 1
    msg = "cannot resolve www.lab.test: not in the --resolve map and no --dns-server given"
    assert msg in capsys.readouterr().err
    assert summ["error"] == msg and summ["ok"] is False and summ["plt_ms"] is None
    assert (summ["coalescing"], summ["seed"], summ["cache_hit_ratio"], summ["requests"]) == (False, 7, 0.5, 1)
    assert validate_har(har) == []
    assert har["log"]["entries"][0]["_error"] == msg
    assert har["log"]["comment"] == f"load failed: {msg}"


def test_unreadable_ca_is_a_failed_load(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    res = load_page_sync(LoadOptions(URL, resolve={"www.lab.test": "127.0.0.1"}, ca_file=str(bad)))
    assert res.error.startswith(f"cannot load the CA file {bad}: ")
    assert not res.ok and res.summary["requests"] == 0 and validate_har(res.har) == []
