"""The page loaders a load may run, one module each: ours (tortoiselab.client),
nghttp, h2load and Chromium (tortoiselab.browser); each a function of
guest/loaders/base.py's signature, registered here by the name
client.loader takes (spec/sides.py)."""

from __future__ import annotations

from tortoiselab.guest.loaders import chromium, h2load, nghttp, ours
from tortoiselab.guest.loaders.base import Loader

LOADERS: dict[str, Loader] = {"loader": ours.load_page, "nghttp": nghttp.load_page, "h2load": h2load.load_page,
                              "chromium": chromium.load_page}
