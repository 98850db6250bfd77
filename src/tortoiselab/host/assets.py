"""An experiment's pages and PKI (results/<name>/.lab): made once per
results folder, with an atomic rename, and shared by all its runs. The
pages are generated (web/pages.py); when the generator changes (a page
added, e.g. app.html), a folder made before would serve 404 for the new
page, so the site records the generator's hash (SITE_VERSION) and is made
again when it differs. The pages already there come out the same (they
depend only on the seed), and the PKI stays: runs stored before and after
meet the same certificates (docs/architecture.md, "Results")."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tortoiselab.web import pages, pki


def site_version() -> str:
    """The hash of the page generator's source."""
    return hashlib.sha256(Path(pages.__file__).read_bytes()).hexdigest()[:16]


def _make_site(lab: Path, seed: int) -> None:
    """lab/site made again from the generator, swapped in by rename."""
    tmp, old = lab / f"site.tmp-{os.getpid()}", lab / f"site.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    pages.generate_site(tmp, seed=seed, domain="lab.test")
    if (lab / "site").exists():
        os.rename(lab / "site", old)
    os.rename(tmp, lab / "site")
    shutil.rmtree(old, ignore_errors=True)
    (lab / "SITE_VERSION").write_text(site_version() + "\n")


def lab_assets(exp_dir: Path, seed: int = 1) -> tuple[Path, Path]:
    """Pages and PKI for this experiment, made once (atomic rename); the
    pages made again when the generator changed since."""
    lab = exp_dir / ".lab"
    if (lab / "READY").exists():
        recorded = (lab / "SITE_VERSION").read_text().strip() if (lab / "SITE_VERSION").exists() else ""
        if recorded != site_version():
            _make_site(lab, seed)
        return lab / "site", lab / "pki"
    tmp = exp_dir / f".lab.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
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
    shutil.rmtree(lab, ignore_errors=True)
    os.rename(tmp, lab)
    os.chmod(lab, 0o755)
    return lab / "site", lab / "pki"
