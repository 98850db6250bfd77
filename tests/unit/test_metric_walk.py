"""docs/architecture.md walks plt_ms from the loader to a verdict, function
by function (issue 53): every `module.py:name` the walk names exists in
src/tortoiselab (read from the source's syntax tree, so the guest's and the
client's modules are checked without their processes' imports), and the
walk goes from the loader to the verdict."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tortoiselab.project import PKG_DIR, REPO_DIR

HEADING = "## The walk of one metric"
REF = re.compile(r"`(?P<module>[\w/]+\.py):(?P<name>[A-Za-z_][\w.]*)`")


def walk_text(doc: Path = REPO_DIR / "docs" / "architecture.md") -> str:
    """The walk's section of the page: its heading up to the next heading."""
    text = doc.read_text(encoding="utf-8")
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    return text[start:end if end >= 0 else None]


def defined(module: Path, dotted: str) -> bool:
    """Whether module defines dotted (a function, class or name at its top,
    or Class.member) in its source."""
    scope: list[ast.stmt] = ast.parse(module.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        found = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            else:  # NAME = ..., A, B = ..., NAME: T = ...
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if part in names:
                found = node
        if found is None:
            return False
        scope = getattr(found, "body", [])
    return True


def missing(text: str, pkg: Path = PKG_DIR) -> list[str]:
    """The walk's references that name no module or no name in it."""
    out = []
    for m in REF.finditer(text):
        module = pkg / m["module"]
        if not module.is_file() or not defined(module, m["name"]):
            out.append(m[0])
    return out


def test_every_name_in_the_walk_exists():
    text = walk_text()
    refs = [m[0] for m in REF.finditer(text)]
    assert len(refs) >= 25, refs  # function by function
    assert not missing(text), f"docs/architecture.md names what the code does not have: {missing(text)}"


def test_the_walk_goes_from_the_loader_to_a_verdict():
    refs = [m[0] for m in REF.finditer(walk_text())]
    assert refs[0].startswith("`client/") and "summarize" in " ".join(refs[:2])
    assert refs[-1] == "`studies/measure.py:read_interval`" and "`studies/registry.py:judge_claim`" in refs
    for step in ("host/store/__init__.py:write_record", "host/store/__init__.py:rebuild_table",
                 "studies/data.py:load_runs", "analysis/gates.py:physics_gate"):
        assert f"`{step}`" in refs, step


@pytest.mark.parametrize("ref", ["`client/summary.py:summarise`", "`client/nosuch.py:summarize`",
                                 "`host/runner.py:_BatchStore.nosuch`"])
def test_the_check_can_fail(ref):
    assert missing(f"step: {ref}") == [ref]
