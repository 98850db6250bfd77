"""An experiment's two sides: the server's settings (ServerCfg) and the
client's (ClientCfg), each with its host (spec/hostspec.py, docs/hosts.md).
Unset and default-valued fields that came later are left out of a dump, so
the run ids (hashes of the dump, spec/experiment.py) of runs that do not use
them stay as they were."""

from __future__ import annotations

import re

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tortoiselab.spec.ccparams import OUR_MODULES, ParamError, check_params
from tortoiselab.spec.hostspec import REGION_HOST, SETTINGS, Buffers, HostSpec, named_host
from tortoiselab.spec.pathspec import STOCK_ALGORITHMS
from tortoiselab.spec.strictnum import NumbersModel

PAGES = ("tiny.html", "small.html", "medium.html", "large.html", "feed.html", "base.html", "article.html", "app.html")
# pages whose document names nothing to fetch (web/pages.py: n_objects 0; a
# test holds the two equal): a load of one, as of a url, has no schedule
DOCUMENT_ONLY = ("base.html", "article.html")
SITE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,43}$")  # an imported site's name (host/sites.py)
KNOWN_CC = (*STOCK_ALGORITHMS, *OUR_MODULES)


def _one_of(v: str, allowed: tuple[str, ...], what: str, has: str) -> str:
    """A field validator's check that v is one of allowed; the error lists them."""
    if v not in allowed:
        raise ValueError(f"unknown {what} {v!r}; {has} {', '.join(allowed)}")
    return v


class _HostCfg(NumbersModel):
    """A side's host (spec/hostspec.py, docs/hosts.md): a named host of
    topologies/hosts.yaml and/or its fields, the fields given winning over
    the name's. A run that sets none hashes to the run id it had before hosts
    could be set (spec/idform.py leaves unset host fields out)."""

    host: str | None = Field(None, description="named host (topologies/hosts.yaml: desktop, mobile, mininet); "
                                               "client only: region, the path's region profile's host")
    tcp_rmem: Buffers | None = Field(None, description=HostSpec.model_fields["tcp_rmem"].description)
    tcp_wmem: Buffers | None = Field(None, description=HostSpec.model_fields["tcp_wmem"].description)
    tcp_window_scaling: bool | None = Field(None, description=HostSpec.model_fields["tcp_window_scaling"].description)

    @field_validator("host")
    @classmethod
    def _known_host(cls, v: str | None) -> str | None:
        if v is not None and v != REGION_HOST:
            named_host(v)  # HostError is a ValueError: pydantic reports it under the field
        return v

    @model_validator(mode="after")
    def _resolve_host(self) -> "_HostCfg":
        """A named host's values fill the fields not given."""
        if self.host is not None and self.host != REGION_HOST:
            named = named_host(self.host)
            for k in SETTINGS:
                if getattr(self, k) is None and getattr(named, k) is not None:
                    setattr(self, k, getattr(named, k))
        return self

    def host_spec(self) -> HostSpec:
        """The settings this side's host gets (None: the namespace's own)."""
        return HostSpec(**{k: getattr(self, k) for k in SETTINGS})


class ServerCfg(_HostCfg):
    model_config = ConfigDict(extra="forbid")
    cc: str = "cubic"
    module_params: dict[str, dict[str, float | int | str]] = Field(default_factory=dict)
    initcwnd_pkts: int | None = Field(10, ge=1, le=1000)
    initrwnd_pkts: int | None = Field(None, ge=1, le=10000)
    slow_start_after_idle: bool = True
    protocol: Literal["h2", "h1"] = "h2"
    tls: Literal["1.3", "1.2"] = "1.3"
    cert: Literal["shared", "separate", "large", "shared-rsa", "separate-rsa"] = "shared"

    @field_validator("cc")
    @classmethod
    def _known_cc(cls, v: str) -> str:
        return _one_of(v, KNOWN_CC, "congestion control algorithm", "the lab has")

    @field_validator("host")
    @classmethod
    def _not_region(cls, v: str | None) -> str | None:
        """(after _known_host)"""
        if v == REGION_HOST:
            raise ValueError("region names the client's host of a region profile; name a host for the server, "
                             "e.g. desktop")
        return v

    @model_validator(mode="after")
    def _params(self) -> "ServerCfg":
        for alg, ps in self.module_params.items():
            try:
                check_params(alg, ps, field="module_params")
            except ParamError as exc:
                raise ValueError(str(exc)) from None
        return self


class ClientCfg(_HostCfg):
    model_config = ConfigDict(extra="forbid")
    page: str = "feed.html"
    url: str | None = Field(None, description="a path on www instead of a page, e.g. objects/1000000.bin")
    coalescing: bool = True
    cache_hit_ratio: float = Field(0.0, ge=0, lt=1)
    cache_unit: Literal["asset", "page"] = Field(
        "asset", description="what cache_hit_ratio counts: asset = that share of each view's assets is cached; "
                             "page = that share of page views is served wholly from cache (seed 001)")
    resolution: Literal["same-ip", "two-ip"] = "same-ip"
    dns: Literal["cold", "warm"] = Field(
        "cold", description="cold: every load resolves its names through the lab's DNS server, inside its PLT; "
                            "warm: names known before the load (no DNS), for every loader (docs/browser.md)")
    loader: Literal["loader", "h2load", "nghttp", "chromium"] = "loader"
    schedule: Literal["chromium", "eager"] | None = Field(
        None, description="our loader's order for a page's requests: chromium (its default for a page) = as "
                          "Chromium schedules them (found as the document arrives, by priority, low-priority ones "
                          "held while it loads); eager = all at once once the whole document is in (the loader "
                          "before issue 51); left out for other loaders and for url (docs/browser.md)")
    protocol: Literal["h2", "h1"] | None = None
    h2load_requests: int = Field(3, ge=1, le=1000)
    repeat_after_idle_s: float | None = Field(
        None, gt=0, le=600, description="load the page a second time on the same connection after this idle gap")
    timeout_s: float = Field(120, gt=0, le=3600)
    site: str | None = Field(
        None, description="an imported site's name (tortoise site import; docs/your-own-site.md): its page, "
                          "origins and certificates are loaded instead of the lab's page or url")

    @field_validator("page")
    @classmethod
    def _page(cls, v: str) -> str:
        return _one_of(v, PAGES, "page", "the lab serves")

    @field_validator("site")
    @classmethod
    def _site(cls, v: str | None) -> str | None:
        if v is not None and not SITE_NAME.match(v):
            raise ValueError(f"{v!r} is no imported site's name (1-44 characters of lower-case letters, digits, "
                             "'.', '_' and '-'); give the --name of `tortoise site import`")
        return v

    @model_validator(mode="after")
    def _site_loads(self) -> "ClientCfg":
        if self.site is not None and (self.url is not None or self.loader not in ("loader", "chromium")):
            raise ValueError(f"client.site: an imported site's page is loaded by our loader or chromium, not with "
                             f"{'a url' if self.url is not None else 'the ' + self.loader + ' loader'}; "
                             "leave client.url out and use loader: loader or chromium")
        return self

    @model_validator(mode="after")
    def _schedule(self) -> "ClientCfg":
        """Our loader schedules a page's requests as Chromium does unless told
        eager; a run that loads one response (a url, or a page with nothing
        to fetch: DOCUMENT_ONLY) or uses another loader has no schedule, so
        those runs keep the ids they had (spec/idform.py)."""
        if self.loader != "loader" and self.schedule is not None:
            raise ValueError(f"client.schedule: the order our loader sends a page's requests in; the {self.loader} "
                             "loader has its own, leave it out")
        if self.schedule is None and self.loader == "loader" and self.url is None \
                and self.page not in DOCUMENT_ONLY:
            self.schedule = "chromium"
        return self
