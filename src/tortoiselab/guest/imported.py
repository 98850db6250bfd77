"""An imported site in the lab (docs/your-own-site.md): the folder the host
made (site.json, bodies/, pki/: host/pageload.py), served by one Apache on
the server host at every lab address of the site (web/harserve.py), the
server holding each address, the client a static ARP entry for each (as
for the two-ip resolution, guest/tasks/pageload.py), and dnsmasq
answering each host with its address (guest/webtier.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tortoiselab.guest import commands as C
from tortoiselab.guest.executor import Executor
from tortoiselab.web import harserve


@dataclass(frozen=True)
class ImportedSite:
    folder: Path
    site: dict
    pki: dict

    @property
    def addresses(self) -> list[str]:
        return [a["lab"] for a in self.site["addresses"]]

    @property
    def names(self) -> dict[str, str]:
        """Each host's DNS answer."""
        return dict(self.site["hosts"])


    @property
    def origin_protocols(self) -> dict[str, str]:
        """Each origin's protocol as recorded, in our loader's words (h2, h1)."""
        return {o: "h2" if v["protocol"] == "h2" else "h1" for o, v in self.site["origins"].items()}


def load(folder: str | Path) -> ImportedSite:
    folder = Path(folder)
    site = json.loads((folder / "site.json").read_text(encoding="utf-8"))
    return ImportedSite(folder, site, harserve.read_site_pki(folder / "pki"))


def write_conf(run_dir: Path, imp: ImportedSite) -> Path:
    """The site's document roots and httpd.conf under run_dir (0755, as
    Apache's children read them as www-data); returns the config's path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(run_dir, 0o755)
    bodies = {r["body"]: (imp.folder / "bodies" / r["body"]).read_bytes() for r in imp.site["responses"].values()}
    served = harserve.write_docroots(run_dir / "www", imp.site, bodies)
    conf = run_dir / "httpd.conf"
    conf.write_text(harserve.render_conf(run_dir, imp.site, served, imp.pki, {a: a for a in imp.addresses}),
                    encoding="utf-8")
    os.chmod(conf, 0o644)
    return conf


def add_addresses(ex: Executor, server, client, imp: ImportedSite) -> None:
    """The server holds every address of the site; the client knows each one's MAC."""
    for ip in imp.addresses:
        ex.run(C.addr_add(server.defaultIntf().name, ip), host=server)
        ex.run(C.neigh_permanent(ip, server.defaultIntf().MAC(), client.defaultIntf().name), host=client)
