"""An experiment's pages and PKI (results/<name>/.lab): made once per
results folder, with an atomic rename, and shared by all its runs. The
pages are generated (web/pages.py); when the generator changes (a page
added, e.g. app.html), a folder made before would serve 404 for the new
page, so the site records the generator's hash (SITE_VERSION: its modules'
sources, the image encoders included) and is made again when it differs. The pages already there come out the same (they
depend only on the seed), and the PKI stays: runs stored before and after
meet the same certificates (docs/architecture.md, "Results"). Nothing
here is made, replaced or removed through a link: the store makes it
in the folder (host/store/files.py), the generators write into the
staging folder it lends them.

The PKI holds only the certificate variants the experiment's runs use
(`server.cert` over all its runs), in the groups web/pki.py makes together
(PKI_GROUPS): the RSA-4096 keys of `large` and the RSA-2048 keys of the
`-rsa` variants cost about 1.3 s, which most experiments never use
(docs/speed.md). A folder whose PKI lacks a group a later invocation needs
gets it added: made in a temporary folder and moved in, pki.json rewritten
atomically; no file the PKI had is touched."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from tortoiselab.host import safefs
from tortoiselab.host.errors import RunnerError
from tortoiselab.host.store import files
from tortoiselab.web import images, pages, pki

# the site every results folder gets (its runs' seeds are their own: the pages
# are one fixed set, which host/labcheck.py makes again to compare)
SITE_SEED, SITE_DOMAIN = 1, "lab.test"
# the modules whose source makes the site's bytes
SITE_MODULES = (pages, images)
# certificate variants made together (web/pki.py): the Ed25519 small chains
# (derived from the seed name: made again, the same bytes); the RSA small
# chains (one random RSA root, ca-rsa.pem, shared by both); the large chain
# (random RSA-4096 keys under the Ed25519 CA)
PKI_GROUPS = (("shared", "separate"), ("shared-rsa", "separate-rsa"), ("large",))
# what make_pki writes whatever the variants: the Ed25519 CA, the description
PKI_COMMON = ("ca.pem", "ca.key", "pki.json")


def pki_groups(certs: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """The groups of PKI_GROUPS that hold these certificate variants
    (`server.cert` values), in PKI_GROUPS order; ValueError naming an
    unknown variant."""
    certs = set(certs)
    unknown = certs - {v for g in PKI_GROUPS for v in g}
    if unknown:
        raise ValueError(f"server.cert: unknown certificate variant(s) {sorted(unknown)}; "
                         f"use one of {[v for g in PKI_GROUPS for v in g]}")
    return tuple(g for g in PKI_GROUPS if certs & set(g))


def missing_groups(have: Iterable[str], certs: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """The groups these certs need of which a PKI with the variants `have`
    lacks any variant (a group is made whole or not at all)."""
    have = set(have)
    return tuple(g for g in pki_groups(certs) if not set(g) <= have)


def site_version() -> str:
    """The hash of the page generator's source (SITE_MODULES)."""
    h = hashlib.sha256()
    for m in SITE_MODULES:
        h.update(hashlib.sha256(Path(m.__file__).read_bytes()).digest())
    return h.hexdigest()[:16]


def _make_site(exp_dir: Path, lab: Path, seed: int) -> None:
    """lab/site made again from the generator, swapped in by rename."""
    tmp, old = lab / f"site.tmp-{os.getpid()}", lab / f"site.old-{os.getpid()}"
    doing = f"making the pages of {lab}"
    files.fresh_dir(exp_dir, tmp, doing)
    pages.generate_site(tmp, seed=seed, domain=SITE_DOMAIN)  # into the folder the store lent it
    if os.path.lexists(lab / "site"):
        files.remove(exp_dir, old, doing)
        files.replace(exp_dir, lab / "site", old, doing)
    files.replace(exp_dir, tmp, lab / "site", doing)
    files.remove(exp_dir, old, doing)
    files.write_file(exp_dir, lab / "SITE_VERSION", site_version() + "\n", doing)


def _extend_pki(exp_dir: Path, lab: Path, groups: tuple[tuple[str, ...], ...], have: dict, seed_name: str) -> None:
    """lab/pki with these groups added: made in lab/pki.tmp-<pid> (the same
    seed name, so the same Ed25519 CA), their files moved in, then pki.json
    (`have`, its variants joined by the new ones) replaced atomically. A
    file of a new group already there is the leftover of an extension that
    was interrupted before pki.json named it: it is replaced."""
    root, doing, dest = lab.parent.parent, f"adding certificate variants to {lab / 'pki'}", lab / "pki"
    tmp = files.fresh_dir(exp_dir, lab / f"pki.tmp-{os.getpid()}", doing)
    try:  # the PKI maker writes into the folder the store lent it
        made = pki.make_pki(tmp, domain=have["domain"], seed_name=seed_name, variants=[v for g in groups for v in g])
        if any(g != ("shared-rsa", "separate-rsa") for g in groups) and \
                safefs.read_bytes_regular(dest / "ca.pem", root, doing) != (tmp / "ca.pem").read_bytes():
            raise RunnerError(f"{dest}: its CA is not the one the seed name {seed_name!r} gives, so the "
                              f"certificate variants {[v for g in groups for v in g]} cannot be made under it; "
                              f"remove {lab} (its pages and PKI are made again) or use another --results")
        for name in sorted(os.listdir(tmp)):
            if name not in PKI_COMMON:
                files.remove(exp_dir, dest / name, doing)
                files.replace(exp_dir, tmp / name, dest / name, doing)
        variants = {**have["variants"], **pki.rebased(made, dest)["variants"]}
        files.write_file(exp_dir, dest / "pki.json",
                         json.dumps({**have, "variants": variants}, indent=1, sort_keys=True) + "\n", doing)
    finally:
        files.remove(exp_dir, tmp, doing)


def lab_assets(exp_dir: Path, seed: int = SITE_SEED, certs: Iterable[str] = pki.VARIANTS) -> tuple[Path, Path]:
    """Pages and PKI for this experiment, made once (atomic rename), the PKI
    with the groups of the certificate variants `certs` (pki_groups); the
    pages made again when the generator changed since, the groups a PKI
    made before lacks added (_extend_pki)."""
    lab = exp_dir / ".lab"
    root, doing = exp_dir.parent, f"making the lab assets of {exp_dir}"
    groups = pki_groups(certs)
    if safefs.is_link(lab):
        raise safefs.refusal([lab], doing)
    if (lab / "READY").exists():
        recorded = safefs.read_text(lab / "SITE_VERSION", root, doing).strip() \
            if os.path.lexists(lab / "SITE_VERSION") else ""
        if recorded != site_version():
            _make_site(exp_dir, lab, seed)
        try:
            have = json.loads(safefs.read_text(lab / "pki" / "pki.json", root, doing))
            missing = missing_groups(have["variants"], certs)
        except (FileNotFoundError, ValueError, KeyError, TypeError) as exc:
            raise RunnerError(f"{lab / 'pki' / 'pki.json'}: not a readable PKI description ({exc!r}); remove "
                              f"{lab} (its pages and PKI are made again)") from None
        if missing:
            _extend_pki(exp_dir, lab, missing, have, exp_dir.name)
        return lab / "site", lab / "pki"
    tmp = files.fresh_dir(exp_dir, exp_dir / f".lab.tmp-{os.getpid()}", doing)
    try:  # the generators write into the folder the store lent them
        pages.generate_site(tmp / "site", seed=seed, domain=SITE_DOMAIN)
        pki.make_pki(tmp / "pki", domain=SITE_DOMAIN, seed_name=exp_dir.name, variants=[v for g in groups for v in g])
        # the pki.json inside names files under tmp: rewritten for the final place
        pj = tmp / "pki" / "pki.json"
        files.write_file(exp_dir, pj, safefs.read_text(pj, root, doing).replace(str(tmp), str(lab)), doing)
        files.write_new(exp_dir, tmp / "SITE_VERSION", site_version() + "\n", doing)
        files.write_new(exp_dir, tmp / "READY", "ok\n", doing)
    except OSError:
        files.remove(exp_dir, tmp, doing, quiet=True)  # e.g. a full filesystem: leave nothing half made
        raise
    files.remove(exp_dir, lab, doing)
    files.replace(exp_dir, tmp, lab, doing)
    files.chmod(exp_dir, lab, 0o755, doing)
    return lab / "site", lab / "pki"
