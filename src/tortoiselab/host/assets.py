"""An experiment's pages and PKI (results/<name>/.lab): made once per
results folder, with an atomic rename, and shared by all its runs. The
pages are generated (web/pages.py); when the generator changes (a page
added, e.g. app.html), a folder made before would serve 404 for the new
page, so the site records the generator's hash (SITE_VERSION: its modules'
sources, the image encoders included) and is made again when it differs. The pages already there come out the same (they
depend only on the seed), and the PKI stays: runs stored before and after
meet the same certificates (docs/architecture.md, "Results"). Nothing
here is made, replaced or removed through a link (host/safefs.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tortoiselab.host import safefs
from tortoiselab.web import images, pages, pki

# the modules whose source makes the site's bytes
SITE_MODULES = (pages, images)


def site_version() -> str:
    """The hash of the page generator's source (SITE_MODULES)."""
    h = hashlib.sha256()
    for m in SITE_MODULES:
        h.update(hashlib.sha256(Path(m.__file__).read_bytes()).digest())
    return h.hexdigest()[:16]


def _make_site(lab: Path, seed: int) -> None:
    """lab/site made again from the generator, swapped in by rename."""
    tmp, old = lab / f"site.tmp-{os.getpid()}", lab / f"site.old-{os.getpid()}"
    root, doing = lab.parent.parent, f"making the pages of {lab}"
    safefs.rmtree(tmp, root, doing)
    safefs.mkdir(tmp, root, doing=doing)
    pages.generate_site(tmp, seed=seed, domain="lab.test")
    if os.path.lexists(lab / "site"):
        safefs.rmtree(old, root, doing)
        safefs.replace(lab / "site", old, root, doing)
    safefs.replace(tmp, lab / "site", root, doing)
    safefs.rmtree(old, root, doing)
    safefs.write_text(lab / "SITE_VERSION", site_version() + "\n", root, doing)


def lab_assets(exp_dir: Path, seed: int = 1) -> tuple[Path, Path]:
    """Pages and PKI for this experiment, made once (atomic rename); the
    pages made again when the generator changed since."""
    lab = exp_dir / ".lab"
    root, doing = exp_dir.parent, f"making the lab assets of {exp_dir}"
    if safefs.is_link(lab):
        raise safefs.refusal([lab], doing)
    if (lab / "READY").exists():
        recorded = safefs.read_text(lab / "SITE_VERSION", root, doing).strip() \
            if os.path.lexists(lab / "SITE_VERSION") else ""
        if recorded != site_version():
            _make_site(lab, seed)
        return lab / "site", lab / "pki"
    tmp = exp_dir / f".lab.tmp-{os.getpid()}"
    safefs.rmtree(tmp, root, doing)
    safefs.mkdir(tmp, root, doing=doing)
    try:
        pages.generate_site(tmp / "site", seed=seed, domain="lab.test")
        pki.make_pki(tmp / "pki", domain="lab.test", seed_name=exp_dir.name)
        (tmp / "SITE_VERSION").write_text(site_version() + "\n")
        (tmp / "READY").write_text("ok\n")
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # e.g. a full filesystem: leave nothing half made
        raise
    # the pki.json inside names files under tmp: rewrite to the final place
    pj = tmp / "pki" / "pki.json"
    pj.write_text(pj.read_text().replace(str(tmp), str(lab)))
    safefs.rmtree(lab, root, doing)
    safefs.replace(tmp, lab, root, doing)
    os.chmod(lab, 0o755)
    return lab / "site", lab / "pki"
