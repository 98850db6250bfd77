"""What every page loader of a load shares (guest/loaders/): its signature,
(executor, the lab's path, its web tier, our loader's process if it runs,
the load, the names it resolves, the load's folder) -> (its summary, the
HAR's path or None), and the grace the executor leaves it past its own
timeout."""

from __future__ import annotations

from typing import Callable

LOADER_GRACE_S = 60.0  # beyond the loader's own --timeout before the executor kills it

Loader = Callable[..., tuple[dict, "str | None"]]
