"""The store is the only writer of a results folder (docs/architecture.md,
"The store writes the results folder"; issue 40).

A static check over src/tortoiselab (ast, no import): no module but the
store's creates, writes, truncates, renames, links, chmods or removes a
path in a results folder.

The rule, as the code can be checked:

1. *Write calls*: open() in a mode that writes, os.open with a flag that
   writes or creates, Path.write_text/write_bytes/mkdir/touch/unlink/
   rmdir/rename/replace/symlink_to/hardlink_to/chmod, os.replace/rename/
   remove/unlink/mkdir/makedirs/rmdir/link/symlink/chmod/truncate,
   shutil.rmtree/move/copy/copy2/copyfile/copytree, savefig/to_parquet/
   to_csv with a path, and host/safefs.py's writers.
2. *A results path*: by the code's naming convention a results folder, an
   experiment's folder or a run's folder is passed and kept under one of
   RESULTS_NAMES (exp_dir, results, run_dir, ... also as an attribute:
   `a.results`, `ctx.exp_dir`); a name assigned from an expression that
   mentions a results path is one too (followed through a function's
   assignments, loops and with-targets to a fixed point; conservative: any
   use of the name counts, even inside a call).
3. Outside the store's modules (STORE: host/store/ and host/safefs.py, its
   link-refusing primitives) no write call takes a results path as an
   argument (or, for a Path method, as the object), and no module calls
   safefs's writers at all, whatever the names: they are the results
   folder's primitives. The one exception, LENT, is named with its reason:
   a module that writes only the lab's work folder, a folder the store
   lends a boot, under the name `work`.
4. Not checked: the lab-side layers (LAB_SIDE: guest, web, client,
   browser, tools), which run in the lab or write only into a folder lent
   to them and never name a results folder (the guest cannot import the
   host: test_architecture); a `run_dir` there is Apache's. Calls of the
   store's API (`files.x(...)`, `store.x(...)`) are the store's writes.

Writes elsewhere (a work folder under /dev/shm or tmp, the kernel cache,
the user's cache, the site generator's output folder, a file the user
names with --out) take paths not derived from a results name and pass.
What a lent folder's borrower writes inside it (the lab guest in its work
folder, the site generator and the PKI maker in a staging folder the store
made and renames into place) is the borrower's: the rule sees the store
lend the folder and take it back, not the borrower's own writes.

`test_the_rule_finds_the_writers_main_had` shows the check can fail: the
writers it finds in snippets shaped like those main had before the store
owned every write (locks opening .lock, assets, report/html, maps).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tortoiselab.host.locks import clean_stale
from tortoiselab.project import PKG_DIR

STORE = ("host/store/", "host/safefs.py")
# the layers that run in the lab (the guest, and the processes it starts) or
# write only into a folder lent to them (web: the site generator and the PKI
# maker; a guest's `run_dir` is Apache's, not a results folder): they never
# name a results folder, and the guest cannot import the host (test_architecture)
LAB_SIDE = ("guest/", "web/", "client/", "browser/", "tools/")
LENT = {"host/workfolder.py": "clears the lab's own files from a work folder before a boot (host/backends.run_task): "
                              "the work folder the store lends a run (or a caller's folder, host/inguest.py); "
                              "its one safefs call has root `work`"}
RESULTS_NAMES = frozenset({"exp_dir", "exp_dirs", "results", "results_dir", "run_dir", "run_dirs", "stored_run",
                           "src_dir", "study_dir"})
PATH_METHODS = frozenset({"write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir", "rename",
                          "symlink_to", "hardlink_to", "chmod"})
ARG_METHODS = frozenset({"savefig", "to_parquet", "to_csv"})
OS_WRITERS = frozenset({"replace", "rename", "remove", "unlink", "mkdir", "makedirs", "rmdir", "link", "symlink",
                        "chmod", "truncate", "renames", "removedirs"})
SHUTIL_WRITERS = frozenset({"rmtree", "move", "copy", "copy2", "copyfile", "copytree"})
SAFEFS_WRITERS = frozenset({"write_text", "write_bytes", "mkdir", "makedirs", "rmtree", "replace", "open_file",
                            "open_fd"})
TWO_PATHS = frozenset({"rename", "replace", "symlink_to", "hardlink_to"})  # Path methods: the second path
STORE_API = frozenset({"files", "store"})  # host/store/files.py and host/store as their callers name them
WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"})


def _mentions(node: ast.AST, names: set[str]) -> bool:
    """node uses one of names (a Name), or a results attribute (x.exp_dir)."""
    return any((isinstance(n, ast.Name) and n.id in names) or
               (isinstance(n, ast.Attribute) and n.attr in RESULTS_NAMES) for n in ast.walk(node))


def _targets(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs of the assignments a node makes."""
    if isinstance(node, ast.Assign):
        return [(t, node.value) for t in node.targets]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, (ast.For, ast.comprehension)):
        return [(node.target, node.iter)]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [(node.optional_vars, node.context_expr)]
    return []


def results_names(fn: ast.AST) -> set[str]:
    """The names in fn that hold a results path: RESULTS_NAMES and every
    name assigned from one, to a fixed point."""
    names = set(RESULTS_NAMES)
    pairs = [p for n in ast.walk(fn) for p in _targets(n)]
    while True:
        new = {t.id for target, value in pairs if _mentions(value, names)
               for t in ast.walk(target) if isinstance(t, ast.Name)} - names
        if not new:
            return names
        names |= new


def _const(node: ast.AST | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _mode(call: ast.Call, at: int) -> ast.AST | None:
    kw = {k.arg: k.value for k in call.keywords}
    return call.args[at] if len(call.args) > at else kw.get("mode") or kw.get("flags")


def write_paths(call: ast.Call) -> tuple[str, list[ast.AST]] | None:
    """(what, the path arguments) when call writes a path, else None."""
    f = call.func
    args = list(call.args) + [k.value for k in call.keywords]
    if isinstance(f, ast.Name) and f.id == "open":
        mode = _const(_mode(call, 1))
        return ("open", call.args[:1]) if any(c in mode for c in "wax+") else None
    if not isinstance(f, ast.Attribute):
        return None
    owner = f.value.id if isinstance(f.value, ast.Name) else ""
    if owner == "safefs" and f.attr in SAFEFS_WRITERS:
        if f.attr == "open_file" and not any(c in _const(_mode(call, 1)) for c in "wax+"):
            return None
        if f.attr == "open_fd" and not _mentions_flag(_mode(call, 1)):
            return None
        return f"safefs.{f.attr}", args
    if owner == "os" and f.attr == "open":
        return ("os.open", call.args[:1]) if _mentions_flag(_mode(call, 1)) else None
    if owner == "os" and f.attr in OS_WRITERS:
        return f"os.{f.attr}", args
    if owner == "shutil" and f.attr in SHUTIL_WRITERS:
        return f"shutil.{f.attr}", args
    if owner in STORE_API:
        return None  # a call of the store's own API
    if f.attr in PATH_METHODS or (f.attr == "replace" and len(call.args) == 1 and not call.keywords):
        return f".{f.attr}", [f.value, *(call.args[:1] if f.attr in TWO_PATHS else [])]
    if f.attr in ARG_METHODS and call.args:
        return f".{f.attr}", call.args[:1]
    if f.attr == "open" and any(c in _const(_mode(call, 0)) for c in "wax+"):
        return ".open", [f.value]
    return None


def _mentions_flag(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, ast.Attribute) and n.attr in WRITE_FLAGS for n in ast.walk(node))


def violations(source: str, rel: str) -> list[str]:
    """Where a module's source writes a results path (rel: its path below
    the package, for the message and the LENT exception)."""
    tree = ast.parse(source)
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = results_names(fn)
        for call in ast.walk(fn):
            hit = write_paths(call) if isinstance(call, ast.Call) else None
            if hit is None:
                continue
            what, paths = hit
            lent = rel in LENT and all(_mentions(p, {"work"}) or not _mentions(p, names) for p in paths)
            if (what.startswith("safefs.") and not lent) or any(_mentions(p, names) for p in paths):
                out.append(f"{rel}:{call.lineno}: {fn.name}: {what}({ast.unparse(paths[0])[:60]}, ...)")
    return sorted(set(out))


def _in_store(rel: str) -> bool:
    return any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in STORE)


def test_no_module_but_the_store_writes_a_results_folder():
    bad = []
    for p in sorted(PKG_DIR.rglob("*.py")):
        rel = p.relative_to(PKG_DIR).as_posix()
        if not _in_store(rel) and not rel.startswith(LAB_SIDE):
            bad += violations(p.read_text(), rel)
    assert not bad, ("these write a path in a results folder; route them through the store "
                     "(host/store/files.py, docs/architecture.md):\n" + "\n".join(bad))


def test_the_store_and_its_exceptions_exist():
    for s in STORE:
        assert (PKG_DIR / s).exists(), s
    for rel, why in LENT.items():
        assert (PKG_DIR / rel).is_file() and why


SHAPES_OF_MAIN = {  # writers as main had them before the store owned every write (shortened)
    "locks": "def experiment_lock(exp_dir):\n    exp_dir.mkdir(parents=True, exist_ok=True)\n"
             "    fh = safefs.open_file(exp_dir / '.lock', 'a+', exp_dir.parent)\n",
    "assets": "def lab_assets(exp_dir):\n    tmp = exp_dir / '.lab.tmp'\n    (tmp / 'READY').write_text('ok')\n",
    "report": "def write_report(exp_dir, out=None):\n    ctx = load(exp_dir)\n"
              "    out = Path(out) if out is not None else ctx.exp_dir / 'report.html'\n"
              "    out.parent.mkdir(parents=True, exist_ok=True)\n",
    "maps": "def write_outputs(f, name, results):\n    folder = study_folder(f, name, results)\n"
            "    for p in paths:\n        tmp_out = folder / p.name\n        os.replace(p, tmp_out)\n",
    "versions": "def _record(exp_dir, mine):\n    tmp = exp_dir / 'x'\n"
                "    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n",
    "cli": "def cmd(a):\n    with open(Path(a.results) / 'x.md', 'w') as fh:\n        fh.write('')\n",
    "safefs": "def anywhere(x):\n    safefs.rmtree(x / 'y', x)\n",
}


def test_the_rule_finds_the_writers_main_had():
    for name, src in SHAPES_OF_MAIN.items():
        assert violations(src, f"{name}.py"), name


def test_the_rule_passes_writes_elsewhere():
    elsewhere = ("def boot(work, req):\n    (work / 'request.json').write_text(req)\n"
                 "    with open(work / 'console.log', 'w') as fh:\n        pass\n"
                 "def strip(path):\n    Path(path).write_text('x')\n"
                 "def cache(digest):\n    f = cache_dir() / digest\n    f.parent.mkdir(parents=True)\n"
                 "def read(exp_dir):\n    return open(exp_dir / 'run.json').read() + 'a'.replace('a', 'b')\n")
    assert violations(elsewhere, "host/backends.py") == []
    lent = "def prepare(work):\n    safefs.rmtree(work / 'boot.json', work)\n"
    assert violations(lent, "host/workfolder.py") == []
    assert violations(lent, "host/other.py")  # safefs's writers are the store's


def test_clean_removes_an_old_studies_cache_and_leaves_a_linked_one(tmp_path):
    """The cache an older version kept in the experiment's folder is read by
    nobody (the studies' cache is the user's since issue 35): `tortoise
    clean` (and a runner's own clean) removes it; a link there is named, not
    followed."""
    exp = tmp_path / "results" / "e"
    (exp / ".studies-cache").mkdir(parents=True)
    (exp / ".studies-cache" / "0123456789ab.flights.json").write_text("[]")
    assert "removed .studies-cache (left by an older version; nothing reads it)" in clean_stale(exp)
    assert not (exp / ".studies-cache").exists()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    (exp / ".studies-cache").symlink_to(victim)
    lines = clean_stale(exp)
    assert any(ln.startswith("left .studies-cache in place: it is a link") for ln in lines)
    assert (victim / "keep").read_text() == "x"
