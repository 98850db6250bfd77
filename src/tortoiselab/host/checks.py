"""What the runner checks before it creates anything (docs/faults.md): URLs
the lab's site serves, paths the lab guest can carry, folders the lab's web
server can enter. Each refusal is a RunnerError naming the field and the fix."""

from __future__ import annotations

import importlib.util
import json
import shutil
import stat
from pathlib import Path

from tortoiselab.host import backends, safefs, umlcmd
from tortoiselab.host.errors import RunnerError
from tortoiselab.spec.experiment import RunSpec
from tortoiselab.web import pages


def check_site_urls(runs: list[RunSpec]) -> None:
    """Refuse, before anything is created, a run whose client.url names an
    object the lab's site does not serve: such a load would answer 404 and
    its figures (a throughput of a few bytes) would look like a slow path.
    The site's single objects are objects/<bytes>.bin for the sizes of
    web.pages.DEFAULT_BULK_SIZES; other paths are checked against the site's
    manifest once it exists (check_manifest_urls)."""
    sizes = pages.DEFAULT_BULK_SIZES
    for url in sorted({r.settings.client.url or "" for r in runs} - {""}):
        path = url.lstrip("/")
        if path.startswith("objects/") and path not in {f"objects/{s}.bin" for s in sizes}:
            raise RunnerError(f"client.url: the lab's site has no {path}; its objects are "
                              + ", ".join(f"objects/{s}.bin" for s in sizes) + " (sizes in bytes, decimal)")


BROWSER_TOOLS = {"chromium": "chromium", "certutil": "libnss3-tools"}  # command -> Debian package


def check_browser_tools(runs: list[RunSpec]) -> None:
    """A run with client.loader chromium needs Debian's chromium, NSS's
    certutil and Playwright for Python (the lab guest sees the host's
    programs); refused before anything starts if one is missing."""
    if not any(r.settings.client.loader == "chromium" for r in runs):
        return
    missing = [pkg for cmd, pkg in BROWSER_TOOLS.items() if shutil.which(cmd) is None]
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (PyPI)")
    if missing:
        raise RunnerError(f"client.loader: chromium needs {', '.join(missing)}; run make setup")


def check_manifest_urls(runs: list[RunSpec], site: Path) -> None:
    """client.url (a path on www) must be a file of the site: a single
    object, a page or one of the pages' objects on www (its manifest)."""
    manifest = json.loads(safefs.read_bytes_regular(site / "manifest.json"))  # no link, no FIFO (host/safefs.py)
    www = f"www.{manifest['domain']}"
    objects = [*manifest["bulk"], *(o for pg in manifest["pages"].values() for o in pg["objects"])]
    known = {o["path"].lstrip("/") for o in objects if o["host"] == www} | set(manifest["pages"])
    for url in sorted({r.settings.client.url or "" for r in runs} - {""}):
        if url.lstrip("/") not in known:
            raise RunnerError(f"client.url: the lab's site has no {url.lstrip('/')}; give a page "
                              f"(client.page) or one of its objects, e.g. objects/1000000.bin")


# folders the UML guest mounts a tmpfs over: a host path under them is
# mounted again for the guest by root (guest/init.sh), so its host modes
# do not stand between the lab's users and the site
GUEST_TMPFS = (Path("/tmp"), Path("/var/tmp"), Path("/run"), Path("/var/log"), Path("/var/lib"))


def check_guest_paths(exp_dir: Path) -> None:
    """The results folder, the project and the venv travel to the lab
    guest's init colon-separated, and Apache serves the experiment's site
    from the results folder as www-data: refuse, before a folder is made, a
    path the guest cannot carry or a folder others cannot enter (each run
    would fail the same way: 403 for every page)."""
    try:
        umlcmd.guest_ro_paths([str(exp_dir)])
    except backends.LabError as exc:
        raise RunnerError(f"results: {exc}") from None

    if any(exp_dir.is_relative_to(d) for d in GUEST_TMPFS):
        return
    for folder in [*reversed(exp_dir.parents), exp_dir]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            raise RunnerError(f"results: the lab's web server runs as www-data and cannot enter {folder} "
                              f"(mode {stat.S_IMODE(folder.stat().st_mode):04o}, not searchable by others); give "
                              f"--results a folder others can enter, or chmod o+x {folder}")


def check_kernel_paths(info: backends.BackendInfo) -> None:
    """Our modules' folder (in the kernel cache, $TORTOISE_CACHE, or
    $TORTOISE_MODULES) travels to the guest's init like the results folder."""
    mods = backends.lab_modules(info) if info.kernel else None
    try:
        umlcmd.plain_paths([str(mods)] if mods is not None else [])
    except backends.LabError as exc:
        raise RunnerError(f"kernel cache: {exc}") from None
