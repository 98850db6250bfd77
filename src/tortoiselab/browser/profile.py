"""A private home and profile for one browser load, with the lab CA trusted
there and nowhere else.

Chromium on Linux reads the user's NSS database ($HOME/.pki/nssdb) and
accepts a CA marked trusted there as a local trust anchor. Every load gets
a new home folder with a new database holding the lab CA alone, made with
NSS's certutil, so the browser verifies the lab's certificates as it would
any site's, for this load only; nothing is trusted system-wide and
certificate errors are never ignored. The profile (Chromium's user data
dir) lives in the same folder, so every load starts cold: no cache, no
cookies, no learned preconnects. The folder is removed on the way out.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CA_NICKNAME = "tortoise-lab-ca"
CERTUTIL_TIMEOUT_S = 60.0


def nssdb_create(db: Path) -> list[str]:
    """A new, empty NSS database (sql format) with no password."""
    return ["certutil", "-N", "-d", f"sql:{db}", "--empty-password"]


def nssdb_add_ca(db: Path, ca_pem: Path, nickname: str = CA_NICKNAME) -> list[str]:
    """The CA certificate trusted to issue server certificates (trust flags
    "C,,": a trusted CA for TLS, nothing for mail or code signing)."""
    return ["certutil", "-A", "-d", f"sql:{db}", "-n", nickname, "-t", "C,,", "-i", str(ca_pem)]


def nssdb_list(db: Path) -> list[str]:
    return ["certutil", "-L", "-d", f"sql:{db}"]


@dataclass(frozen=True)
class Profile:
    home: Path  # HOME for the browser and its driver
    user_data: Path  # Chromium's profile
    tmp: Path  # TMPDIR: the driver's own scratch files

    @property
    def nssdb(self) -> Path:
        return self.home / ".pki" / "nssdb"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The browser's environment: base with HOME, TMPDIR and the XDG
        folders pointing into the private home."""
        return {**base, "HOME": str(self.home), "TMPDIR": str(self.tmp),
                "XDG_CONFIG_HOME": str(self.home / ".config"), "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share")}


class ProfileError(RuntimeError):
    pass


def _run(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=CERTUTIL_TIMEOUT_S,
                           encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ProfileError(f"{argv[0]} is not installed (Debian: libnss3-tools; run make setup)") from None
    except subprocess.TimeoutExpired:
        raise ProfileError(f"{' '.join(argv)} did not finish within {CERTUTIL_TIMEOUT_S} s") from None
    if p.returncode != 0:
        raise ProfileError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return p.stdout


def _at(home: Path) -> Profile:
    return Profile(home=home, user_data=home / "profile", tmp=home / "tmp")


def reuse_profile(home: Path) -> Profile:
    """The profile a priming load left in home (make_profile(..., home=)):
    its HTTP cache warm, its NSS database as made."""
    prof = _at(home)
    if not (prof.nssdb.is_dir() and prof.user_data.is_dir()):
        raise ProfileError(f"{home} holds no browser profile (make one with --prime first)")
    return prof


def make_profile(ca_pem: Path, parent: Path | None = None, home: Path | None = None) -> Profile:
    """A fresh home, at `home` (which must not exist) or under parent
    (default: the system's temporary folder), whose NSS database trusts
    ca_pem; the caller removes it (remove_profile)."""
    if not ca_pem.is_file():
        raise ProfileError(f"the CA file {ca_pem} does not exist")
    if home is not None:
        try:
            home.mkdir(parents=True)
        except FileExistsError:
            raise ProfileError(f"{home} exists: a new profile needs a new folder") from None
    else:
        home = Path(tempfile.mkdtemp(prefix="tortoise-browser-", dir=parent))
    prof = _at(home)
    try:
        for d in (prof.nssdb, prof.user_data, prof.tmp):
            d.mkdir(parents=True)
        _run(nssdb_create(prof.nssdb))
        _run(nssdb_add_ca(prof.nssdb, ca_pem))
        if CA_NICKNAME not in _run(nssdb_list(prof.nssdb)):
            raise ProfileError(f"the lab CA is not in {prof.nssdb} after certutil -A")
    except BaseException:
        remove_profile(prof)
        raise
    return prof


def remove_profile(prof: Profile) -> None:
    shutil.rmtree(prof.home, ignore_errors=True)
