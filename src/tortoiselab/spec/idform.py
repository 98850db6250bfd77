"""The id form: the canonical dict a run's id and seed are hashed from, and
what a run's record keeps as its `config` (docs/architecture.md, "One run,
from YAML to figure").

A run id names stored runs (resume, --reuse-from, a reproduction's
results), so it must not move when the configuration's types grow. The
models dump every field; this module, version ID_FORM_VERSION, says which
fields the id form leaves out, in one table:

- the path as written (PathCfg, every field optional): its unset fields;
- a setting added after ids were first given (LATER): left out while it
  holds the value that means "as before it existed" (or one of them,
  AnyOf), so every earlier run keeps its id. A new setting is one line of
  LATER, not a serializer;
- no topology (the default, wan): left out.

tests/unit/test_run_ids.py holds every shipped experiment's ids to what
they were. Pure functions of dicts.
"""

from __future__ import annotations

from typing import Any

ID_FORM_VERSION = 1


class AnyOf(tuple):
    """A LATER entry with several values that each mean "as before the
    field existed"."""


_HOST_SETTINGS = ("host", "tcp_rmem", "tcp_wmem", "tcp_window_scaling")  # spec/sides.py, docs/hosts.md
# section.field (path.resolved: the resolved path) -> the value that means
# "as before the field existed"
LATER: dict[str, Any] = {
    **{f"path.resolved.{k}": None for k in ("loss_burst_pkts", "loss_burst_up_pkts", "trace_down", "trace_up",
                                            "trace_queue_ms")},
    **{f"{side}.{k}": None for side in ("server", "client") for k in _HOST_SETTINGS},
    "client.cache_unit": "asset",
    "client.dns": "cold",
    # our loader's order of a page's requests (issue 51): eager is how it sent
    # them before, None a run without one (another loader, one response); a
    # page run by the new default, chromium, gets an id of its own
    "client.schedule": AnyOf((None, "eager")),
    "client.site": None,  # an imported site (issue 55): none, the lab's own page
}


def _before(key: str, v: Any) -> bool:
    """Does v, under key, mean "as before the field existed"?"""
    if key not in LATER:
        return False
    b = LATER[key]
    return v in b if isinstance(b, AnyOf) else v == b


def _drop_later(d: dict, prefix: str) -> dict:
    """d without the LATER fields under prefix that hold their "before" value."""
    return {k: v for k, v in d.items() if not _before(f"{prefix}.{k}", v)}


def path_form(resolved: dict) -> dict:
    """A resolved path's dump (PathSpec) in the id form."""
    return _drop_later(resolved, "path.resolved")


def side_form(side: str, dump: dict) -> dict:
    """A server's or client's dump (ServerCfg, ClientCfg) in the id form."""
    return _drop_later(dump, side)


def id_form(config: dict, resolved: dict) -> dict:
    """A run's configuration (RunConfig's full dump) and its resolved path
    (PathSpec's full dump) as the id form: what the run id is hashed from
    and the record's `config`."""
    out = {k: v for k, v in config.items() if k not in ("path", "server", "client", "topology")}
    out["server"] = side_form("server", config["server"])
    out["client"] = side_form("client", config["client"])
    if config.get("topology") is not None:
        out["topology"] = config["topology"]
    out["path"] = {**{k: v for k, v in config["path"].items() if v is not None}, "resolved": path_form(resolved)}
    return out
