import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
TORTOISE = [sys.executable, "-m", "tortoiselab.cli"]
EXPERIMENTS = REPO / "tests" / "data" / "experiments"  # the shared experiments tests derive theirs from


def host_state() -> dict:
    """What a lab run must leave as it found it on the host."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if ":" in line)
    mounts = sorted(line.split()[1] for line in Path("/proc/mounts").read_text().splitlines())
    return {"netns": netns.split(), "links": names, "mounts": mounts}


def group_alive(pgid: int) -> bool:
    """Whether a process of group pgid still runs. A zombie does not: it
    has exited and waits for its parent; an orphan's parent is pid 1, which
    on some machines (a container's init) reaps it seconds later, and
    kill(2) still reaches a zombie. Read from /proc, not by signal 0."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields 5 (pgrp) and 3 (state)
            return True
    return False


@pytest.fixture(scope="session")
def lab_kernel() -> Path:
    out = subprocess.run(["bash", str(REPO / "kernel" / "build-uml.sh"), "--path"], capture_output=True,
                         text=True, check=True).stdout.strip()
    k = Path(os.environ.get("TORTOISE_KERNEL", out))
    if not k.exists():
        pytest.fail(f"the UML lab kernel is not built ({k}): run 'make kernel' (make test does)")
    return k


def write_yaml(folder: Path, text: str, name: str = "e.yaml") -> Path:
    """An experiment file in folder, from an indented literal."""
    f = folder / name
    f.write_text(textwrap.dedent(text))
    return f


def experiment_yaml(base: str, changes: dict | None = None, comment: str = "") -> str:
    """The text of tests/data/experiments/<base>.yaml with `changes` made:
    a key "section.field" sets that field of a section (path.loss_pct,
    client.page, sweep.server.cc: only the first dot splits), any other key
    a top-level entry (name, sweep: the whole entry); None removes what the
    key names. `comment` becomes the file's first line ("# comment")."""
    f = EXPERIMENTS / f"{base}.yaml"
    if not f.is_file():
        raise FileNotFoundError(f"no shared experiment {base!r}: {sorted(p.stem for p in EXPERIMENTS.glob('*.yaml'))}")
    doc = yaml.safe_load(f.read_text())
    for key, value in (changes or {}).items():
        section, _, field = key.partition(".")
        where, name = (doc.setdefault(section, {}), field) if field else (doc, key)
        if value is None:
            where.pop(name, None)
        else:
            where[name] = value
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=1000, allow_unicode=True)
    return f"# {comment}\n{text}" if comment else text


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory):
    """A throwaway self-signed CA certificate (PEM path) for loader tests that need a --ca file."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    k = ec.generate_private_key(ec.SECP256R1())
    n = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(n).issuer_name(n).public_key(k.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True).sign(k, hashes.SHA256()))
    p = tmp_path_factory.mktemp("ca") / "ca.pem"
    p.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(p)
