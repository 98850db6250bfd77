"""Hosts as explicit as links: the TCP buffers of the client and the server.

A host's TCP settings are kernel settings of its network namespace
(net.ipv4.tcp_rmem, tcp_wmem and tcp_window_scaling are per namespace since
Linux 4.15; a new namespace copies the root's tcp_rmem and tcp_wmem,
tcp_sk_init in net/ipv4/tcp_ipv4.c). Mininet writes its own into the root
namespace before it makes the hosts (fixLimits in mininet/util.py:
tcp_rmem and tcp_wmem "10240 87380 16777216"), so an unset host runs with
Mininet's, as every run did before hosts could be set (docs/hosts.md).

An experiment sets them per side (`client:` and `server:`) by name, from
topologies/hosts.yaml (`host: desktop`), field by field (`tcp_rmem: [4096,
131072, 6291456]`, over the named host's values), or, for the client,
`host: region`: the host the path's region profile names. Every value of a
named host has a source or the word `assumption` with a note, as region
profiles do.
"""

from __future__ import annotations

import functools

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from tortoiselab.project import REPO_DIR
from tortoiselab.spec.yamlfile import YamlFileError, read_yaml
from tortoiselab.spec.strictnum import NumbersModel

HOSTS_FILE = REPO_DIR / "topologies" / "hosts.yaml"
# the name that stands for the region profile's host (client only)
REGION_HOST = "region"
# the host settings a side may set: field -> sysctl
SETTINGS = {"tcp_rmem": "net.ipv4.tcp_rmem", "tcp_wmem": "net.ipv4.tcp_wmem",
            "tcp_window_scaling": "net.ipv4.tcp_window_scaling"}
# what every load reads back from each host's namespace (run.json meta)
READ_BACK = (*SETTINGS.values(), "net.ipv4.tcp_moderate_rcvbuf", "net.ipv4.tcp_adv_win_scale",
             "net.core.rmem_max", "net.core.wmem_max")
# the smallest value of a buffer triple the kernel takes (ip-sysctl.rst:
# "Each of the three values cannot be set below 4096" for tcp_rmem); the
# largest: INT_MAX
BUF_MIN, BUF_MAX = 4096, 2**31 - 1


class HostError(ValueError):
    """A hosts file or a host name that cannot be used; the message says which."""


def _triple(v: Any) -> Any:
    """A buffer triple as written: a list of three numbers, or the kernel's
    own text ("4096 131072 6291456", tabs or blanks between)."""
    if isinstance(v, str):
        parts = v.split()
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"give three whole numbers of bytes (min default max), got {v!r}") from None
    return v


def _ordered(v: tuple[int, int, int]) -> tuple[int, int, int]:
    lo, default, hi = v
    if not lo <= default <= hi:
        raise ValueError(f"min {lo} <= default {default} <= max {hi} does not hold; give them in that order")
    return v


Buffers = Annotated[tuple[Annotated[int, Field(ge=BUF_MIN, le=BUF_MAX)],
                          Annotated[int, Field(ge=BUF_MIN, le=BUF_MAX)],
                          Annotated[int, Field(ge=BUF_MIN, le=BUF_MAX)]],
                    BeforeValidator(_triple), AfterValidator(_ordered)]


class HostSpec(NumbersModel):
    """A host's TCP buffer settings; None leaves the namespace's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tcp_rmem: Buffers | None = Field(None, description="TCP receive buffer min, default, max (bytes): "
                                     "net.ipv4.tcp_rmem; the default sets the first advertised windows")
    tcp_wmem: Buffers | None = Field(None, description="TCP send buffer min, default, max (bytes): net.ipv4.tcp_wmem")
    tcp_window_scaling: bool | None = Field(None, description="RFC 7323 window scaling: net.ipv4.tcp_window_scaling")

    def is_set(self) -> bool:
        return any(getattr(self, k) is not None for k in SETTINGS)

    def sysctls(self) -> dict[str, str]:
        """The values to write, by sysctl, as the kernel prints them."""
        out = {}
        for field, key in SETTINGS.items():
            v = getattr(self, field)
            if v is None:
                continue
            out[key] = str(int(v)) if isinstance(v, bool) else " ".join(str(x) for x in v)
        return out


def read_back(sysctls: dict[str, str]) -> HostSpec:
    """The HostSpec a namespace holds, from read_sysctls' values ("" for a
    key it lacks)."""
    vals: dict[str, Any] = {}
    for field, key in SETTINGS.items():
        text = sysctls.get(key, "")
        if text:
            vals[field] = text if field != "tcp_window_scaling" else text.strip() == "1"
    return HostSpec(**vals)


class NamedHost(NumbersModel):
    """One named host with a source for every value it sets."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str = Field(min_length=1)
    host: HostSpec
    sources: dict[str, str]
    notes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _every_value_sourced(self) -> "NamedHost":
        given = [k for k in SETTINGS if getattr(self.host, k) is not None]
        problems = [f"sources.{k}: missing; host.{k} needs a citation or the word 'assumption'"
                    for k in given if not self.sources.get(k, "").strip()]
        problems += [f"sources.{k}: the host sets no {k}" for k in self.sources if k not in given]
        problems += [f"notes.{k}: the host sets no {k}" for k in self.notes if k not in given]
        problems += [f"notes.{k}: an assumption needs its reason here" for k in given
                     if self.sources.get(k) == "assumption" and k not in self.notes]
        if problems:
            raise ValueError("\n".join(problems))
        return self


class HostsFile(NumbersModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(ge=1, le=1)
    hosts: dict[str, NamedHost]

    @model_validator(mode="after")
    def _names(self) -> "HostsFile":
        if REGION_HOST in self.hosts:
            raise ValueError(f"hosts.{REGION_HOST}: the name stands for a region profile's host; rename it")
        return self


def load_hosts(path: Path | None = None) -> dict[str, NamedHost]:
    """The named hosts of topologies/hosts.yaml (or `path`); HostError
    naming the file and the field. Read once per version of the file (an
    experiment's expansion names a host for every run of a population)."""
    path = HOSTS_FILE if path is None else Path(path)
    try:
        st = path.stat()
    except OSError:
        return _read_hosts(path)  # read_yaml says what is wrong
    return dict(_cached_hosts(str(path), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=16)
def _cached_hosts(path: str, mtime_ns: int, size: int) -> dict[str, NamedHost]:
    return _read_hosts(Path(path))


def _read_hosts(path: Path) -> dict[str, NamedHost]:
    try:
        raw = read_yaml(path, "hosts file")
        return HostsFile.model_validate(raw).hosts
    except YamlFileError as exc:
        raise HostError(str(exc)) from None
    except ValidationError as exc:
        lines = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                 for e in exc.errors()]
        raise HostError(f"{path}:\n  " + "\n  ".join(lines)) from None


def named_host(name: str, hosts: dict[str, NamedHost] | None = None) -> HostSpec:
    """The settings of a named host; HostError listing the known names."""
    hosts = load_hosts() if hosts is None else hosts
    if name not in hosts:
        raise HostError(f"unknown host {name!r}; topologies/hosts.yaml has {', '.join(sorted(hosts))}")
    return hosts[name].host
