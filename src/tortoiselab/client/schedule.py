"""When a page's requests leave (client.schedule): all at once (eager), or
as Chromium schedules them (chromium). Pure logic, no network: the loader
(loader.py) tells a ChromiumScheduler what the document's scanner found,
when the parser reached <body>, which origins it holds an HTTP/2 connection
for, and which requests finished; the scheduler says which requests may
leave now. tests/unit/test_client_schedule.py drives it with event
sequences.

Chromium's rules, from its source (read, not copied) and the lab's own
Chromium runs (docs/browser.md, "When the requests leave"):

1. Priorities (Blink's ResourceFetcher::ComputeLoadPriority,
   third_party/blink/renderer/platform/loader/fetch/resource_fetcher.cc;
   web.dev/articles/fetch-priority lists the same defaults), named as
   DevTools names them:
   - a style sheet: VeryHigh; one the preload scanner finds after the
     page's first image: Medium;
   - a classic script: High; with defer or async (or a module script): Low;
     a blocking one found after the first image: Medium;
   - an image: Low; the first five that are not small (width x height from
     their attributes over 10,000 px^2, or not given) found by the preload
     scanner: Medium (Chromium's BoostImagePriority, image_count 5,
     image_size 10000); loading=lazy: VeryLow; at the first layout
     (once <body> is parsed and the style sheets found before it have
     loaded), every image in the viewport not yet sent: High (Blink's
     ResourceFetcher::UpdateAllImageResourcePriorities; where an image
     lands is estimated, client/fold.py).
2. Blink's ResourceLoadScheduler (resource_load_scheduler.cc), per frame:
   "tight" until the parser inserts <body> (Document::WillInsertBody), then
   "normal". In tight mode a request below High waits while 2 or more
   requests are in flight through it (tight_limit 2), except that up to 2
   Medium ones may be in flight whatever the count (BoostImagePriority's
   tight_medium_limit 2). Normal mode: 1024 (no limit for a lab page).
3. The network service's ResourceScheduler (services/network/
   resource_scheduler/resource_scheduler.cc): a "delayable" request
   (below High) for an origin not known to support request priorities
   (HttpServerProperties: no HTTP/2 connection was opened for it, e.g. an
   origin reached only by coalescing onto another origin's connection)
   waits while 10 delayable requests are in flight in all
   (max_delayable_requests) or 6 requests of any priority to its origin
   (kMaxNumDelayableRequestsPerHostPerClient). Pending requests are taken
   highest priority first, in the order found within a priority; a request
   held by its origin's limit lets later ones of other origins pass, the
   client-wide limit stops the scan. A request to an origin known to
   support priorities is not delayed (DelayRequestsOnMultiplexedConnections
   holds only on networks Chromium estimates as 3G or slower).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fold import VIEWPORT_H
from .page import Found

SCHEDULES = ("eager", "chromium")

# Blink's ResourceLoadPriority, lowest first, as DevTools names them
VERY_LOW, LOW, MEDIUM, HIGH, VERY_HIGH = range(5)
PRIORITY_NAMES = ("VeryLow", "Low", "Medium", "High", "VeryHigh")

SMALL_IMAGE_PX2 = 10_000  # BoostImagePriority image_size
BOOSTED_IMAGES = 5  # BoostImagePriority image_count
TIGHT_LIMIT = 2  # ResourceLoadScheduler kTightLimitForRendererSideResourceScheduler
TIGHT_MEDIUM_LIMIT = 2  # BoostImagePriority tight_medium_limit
MAX_DELAYABLE = 10  # ResourceScheduler kDefaultMaxNumDelayableRequestsPerClient
MAX_PER_HOST = 6  # ResourceScheduler kMaxNumDelayableRequestsPerHostPerClient


@dataclass
class Request:
    found: Found
    priority: int
    seq: int  # order found
    stage: str = "blink"  # blink (held by the frame's scheduler) | net (held by the network's) | sent | done
    holds_blink: bool = False  # counted in the frame's in-flight requests

    @property
    def key(self) -> tuple[int, int]:
        return (-self.priority, self.seq)


class Priorities:
    """ComputeLoadPriority for what the preload scanner finds, in the order
    found (an image found makes later scripts and style sheets "late";
    the first BOOSTED_IMAGES not-small images are boosted)."""

    def __init__(self) -> None:
        self.image_found = False
        self.boosted = 0

    def of(self, f: Found) -> int:
        late = self.image_found
        if f.kind == "stylesheet":
            return MEDIUM if late else VERY_HIGH
        if f.kind == "script":
            if f.deferred:
                return LOW
            return MEDIUM if late else HIGH
        if f.kind == "image":
            self.image_found = True
            if f.lazy:
                return VERY_LOW
            small = f.area is not None and f.area <= SMALL_IMAGE_PX2
            if not small and self.boosted < BOOSTED_IMAGES:
                self.boosted += 1
                return MEDIUM
            return LOW
        return LOW


@dataclass
class ChromiumScheduler:
    """The two gates a subresource request passes in Chromium (module
    docstring, 2 and 3). Feed it events; take() returns the requests that
    may leave now, each once, in the order they leave."""

    known: set[str] = field(default_factory=set)  # origins known to support request priorities
    priorities: Priorities = field(default_factory=Priorities)
    requests: list[Request] = field(default_factory=list)
    body_found: bool = False
    tight: bool = True
    laid_out: bool = False
    _ready: list[Request] = field(default_factory=list)

    # -- events ---------------------------------------------------------------
    def add(self, f: Found) -> Request:
        """The scanner found f (each URL once)."""
        r = Request(f, self.priorities.of(f), len(self.requests))
        if self.laid_out:
            self._visible(r)
        self.requests.append(r)
        self._pump()
        return r

    def body(self) -> None:
        """The document's parser reached <body> (or content that implies it)."""
        self.body_found = True
        self._pump()

    def origin_known(self, origin: str) -> None:
        """An HTTP/2 connection was opened for origin (Chromium records that
        the server supports request priorities)."""
        self.known.add(origin)
        self._pump()

    def done(self, r: Request) -> None:
        """r finished (its last byte, or failed)."""
        r.stage = "done"
        self._pump()

    def take(self) -> list[Request]:
        """The requests that may leave now, in order; each is returned once."""
        out, self._ready = self._ready, []
        return out

    # -- the gates ------------------------------------------------------------
    def _pump(self) -> None:
        if self.tight and self.body_found and not self._parser_blocked():
            self.tight = False  # Document::WillInsertBody -> LoosenThrottlingPolicy
        while self._blink_step() or self._net_step():
            pass
        if not self.laid_out and self.body_found and all(
                r.stage == "done" for r in self.requests if r.found.kind == "stylesheet" and not r.found.in_body):
            # the first layout, a frame after what freed it: slots freed by the
            # event that led to it were taken above; now the visible images
            self.laid_out = True
            for r in self.requests:
                self._visible(r)
            while self._blink_step() or self._net_step():
                pass

    @staticmethod
    def _visible(r: Request) -> None:
        f = r.found
        if f.kind == "image" and r.stage in ("blink", "net") and f.top is not None and f.top < VIEWPORT_H:
            r.priority = max(r.priority, HIGH)

    def _parser_blocked(self) -> bool:
        """A blocking script found before <body> that has not run yet: it
        waits for itself and for every style sheet found before it."""
        blockers = [r for r in self.requests if r.found.blocking and not r.found.in_body]
        if not blockers:
            return False
        last = max(r.seq for r in blockers)
        return any(r.stage != "done" for r in self.requests
                   if r.seq <= last and (r.found.blocking or r.found.kind == "stylesheet"))

    def _blink_step(self) -> bool:
        """ResourceLoadScheduler: the highest pending request that may run."""
        pending = sorted((r for r in self.requests if r.stage == "blink"), key=lambda r: r.key)
        if not pending:
            return False
        r = pending[0]
        if self.tight and r.priority < HIGH:
            running = [x for x in self.requests if x.holds_blink and x.stage != "done"]
            medium = sum(1 for x in running if x.priority == MEDIUM)
            if not (len(running) < TIGHT_LIMIT or (r.priority == MEDIUM and medium < TIGHT_MEDIUM_LIMIT)):
                return False
        r.stage, r.holds_blink = "net", True
        return True

    def _net_step(self) -> bool:
        """ResourceScheduler: start the first pending request that may start."""
        in_flight = [x for x in self.requests if x.stage == "sent"]
        for r in sorted((x for x in self.requests if x.stage == "net"), key=lambda x: x.key):
            origin = r.found.origin
            if r.priority >= HIGH or origin in self.known:
                return self._send(r)
            if sum(1 for x in in_flight if x.priority < HIGH and x.found.origin not in self.known) >= MAX_DELAYABLE:
                return False
            if sum(1 for x in in_flight if x.found.origin == origin) >= MAX_PER_HOST:
                continue
            return self._send(r)
        return False

    def _send(self, r: Request) -> bool:
        r.stage = "sent"
        self._ready.append(r)
        return True
