"""Tests do not change the machine (issue 40): no test runs a package
manager's install. `make setup` and `make setup-test` install (scripts/); a
test that misses something fails naming the target."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MANAGERS = {"apt-get", "apt", "dpkg", "pip", "pip3", "dnf", "yum"}
INSTALL = {"install", "-i", "--install"}
SHELL_INSTALL = re.compile(r"\b(apt-get|apt|pip3?|dnf|yum)\s+(-\S+\s+)*install\b|\bdpkg\s+(-i|--install)\b")
RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "system"}


def installs(source: str) -> list[int]:
    """Lines of source that run an install: an argv with a package manager
    then install, or a shell command string given to a process runner."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if any(a.rsplit("/", 1)[-1] in MANAGERS and b in INSTALL for a, b in zip(words, words[1:])):
                out.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in RUNNERS:
            if any(isinstance(a, ast.Constant) and isinstance(a.value, str) and SHELL_INSTALL.search(a.value)
                   for a in node.args):
                out.append(node.lineno)
    return out


def test_the_check_sees_an_install():
    assert installs('subprocess.run(["apt-get", "install", "-y", "chromium"])') == [1]
    assert installs('x = 1\nsubprocess.run(("/usr/bin/pip", "install", "x"))') == [2]
    assert installs('os.system("sudo apt-get -y install vagrant")') == [1]
    assert installs('subprocess.run(["dpkg-query", "-W", "vagrant"])\n"""run `apt-get install` once"""') == []


def test_no_test_installs_packages():
    found = {str(f.relative_to(TESTS)): lines for f in sorted(TESTS.rglob("*.py"))
             if (lines := installs(f.read_text()))}
    assert not found, f"tests that install packages (install in scripts/ through make setup instead): {found}"
