"""Every text file the package reads or writes is UTF-8, whatever the locale
(issue 50): under `LC_ALL=C PYTHONUTF8=0 PYTHONCOERCECLOCALE=0` Python's
default text encoding is ASCII, and `tortoise grade` failed on "'ascii' codec
can't decode" reading a handout. A static check names any text open, read or
write without `encoding=`, and one real command runs in that locale."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tortoiselab.project import PKG_DIR, REPO_DIR

# calls whose text mode takes the locale's encoding unless told otherwise
TEXT_METHODS = ("read_text", "write_text")
SUBPROCESS_TEXT = ("run", "Popen", "check_output")


def _module_names(tree: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            names |= {a.asname or a.name for a in n.names}
    return names - {"Path"}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_text_mode(call: ast.Call, position: int) -> bool:
    mode = _keyword(call, "mode")
    if mode is None and len(call.args) > position:
        mode = call.args[position]
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return "b" not in mode.value
    return True  # the default ("r") or a mode not known here: text unless it says "b"


def _needs_encoding(call: ast.Call, modules: set[str]) -> bool:
    if _keyword(call, "encoding") is not None:
        return False
    fn = call.func
    if isinstance(fn, ast.Name):
        return fn.id == "open" and _is_text_mode(call, 1)
    if not isinstance(fn, ast.Attribute):
        return False
    receiver = fn.value.id if isinstance(fn.value, ast.Name) else None
    if receiver == "os":
        return fn.attr == "fdopen" and _is_text_mode(call, 1)
    if receiver == "subprocess":
        text = _keyword(call, "text") or _keyword(call, "universal_newlines")
        return fn.attr in SUBPROCESS_TEXT and isinstance(text, ast.Constant) and text.value is True
    if receiver in modules:  # the project's own helpers (safefs.read_text, files.write_text) say UTF-8 inside
        return False
    return fn.attr in TEXT_METHODS or (fn.attr == "open" and _is_text_mode(call, 0))


def text_io_without_encoding(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    modules = _module_names(tree)
    return sorted((c.lineno, ast.unparse(c)[:100]) for c in ast.walk(tree)
                  if isinstance(c, ast.Call) and _needs_encoding(c, modules))


def test_the_check_sees_what_takes_the_locales_encoding():
    bad = text_io_without_encoding(
        "import os, subprocess\nfrom pathlib import Path\nfrom tortoiselab.host import safefs\n"
        "open('a')\nopen('a', 'w')\nPath('a').read_text()\nPath('a').write_text('x')\n"
        "Path('a').open()\nos.fdopen(3, 'r')\nsubprocess.run(['x'], text=True)\n"
        "open('a', 'rb')\nPath('a').open('wb')\nos.fdopen(3, 'rb')\nPath('a').read_text(encoding='utf-8')\n"
        "safefs.read_text(Path('a'), Path('.'))\nsubprocess.run(['x'])\nos.open('a', 0)\n")
    assert [line for line, _ in bad] == [4, 5, 6, 7, 8, 9, 10]


def test_every_text_read_and_write_of_the_package_names_utf8():
    found = [f"{f.relative_to(PKG_DIR)}:{line}: {call}"
             for f in sorted(PKG_DIR.rglob("*.py"))
             for line, call in text_io_without_encoding(f.read_text(encoding="utf-8"))]
    assert not found, "add encoding=\"utf-8\" to:\n" + "\n".join(found)


def test_grade_reads_a_handout_in_the_c_locale_without_utf8_coercion():
    # the handouts hold non-ASCII text (an en dash, "µs"): ASCII cannot decode them
    lab = REPO_DIR / "labs" / "04-initcwnd.md"
    assert any(b > 127 for b in lab.read_bytes()), "pick a handout with non-ASCII text"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIOENCODING"))}
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    code = ("import locale, sys; from tortoiselab.course.handout import load_lab;"
            "assert locale.getpreferredencoding(False).lower() in ('ascii', 'ansi_x3.4-1968'), "
            "locale.getpreferredencoding(False);"
            f"lab = load_lab({str(lab)!r}); print(len(lab.experiments))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60,
                       encoding="utf-8", errors="replace")
    assert p.returncode == 0, p.stderr[-2000:]
    assert int(p.stdout.strip()) >= 1
