"""docs/architecture.md's index of features across the layers names files
that exist (issue 40: a feature's spec, lab and analysis sides findable
from one place)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _index() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    return text[text.index("## Features across the layers"):text.index("## Where to add things")]


def test_every_file_the_index_names_exists():
    index = _index()
    named = set(re.findall(r"`((?:spec|guest|analysis|host|studies|report|tools|browser|client|topologies|docs)"
                           r"/[A-Za-z0-9_./-]*)`", index))
    assert len(named) >= 30
    missing = []
    for n in sorted(named):
        under_pkg = REPO / "src" / "tortoiselab" / n
        if not (under_pkg.exists() or (REPO / n).exists()):
            missing.append(n)
    assert not missing, f"docs/architecture.md's feature index names files that do not exist: {missing}"
