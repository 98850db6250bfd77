"""Facts in README.md and docs/ that come from the code, checked against it
(issue 40, "Docs that drift"): the make targets, the package layout, the lab
kernel's release, the store's format version, the topologies a field names,
the README's length and the links between the pages. Measured numbers are
not checked here; the docs date them instead."""

import re
from pathlib import Path

import pytest

from tortoiselab.host import store
from tortoiselab.spec import topologies
from tortoiselab.spec.topologies import TopologyCfg

REPO = Path(__file__).resolve().parents[2]
PKG_DIR = REPO / "src" / "tortoiselab"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 200

RULE = re.compile(r"^([A-Za-z][\w.-]*)\s*:(?![=:])", re.M)
INCLUDE = re.compile(r"^include\s+(\S+)", re.M)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
LAB_KERNEL_PROSE = re.compile(r"(\w+\s+)?lab kernel[^.;:]{0,40}?\b(\d+\.\d+\.\d+)\b")
FORMAT_CLAIM = re.compile(r"format_version`?\s+(\d+)\)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
README_SECTION = re.compile(r'README(?:\.md)?,?\s+"([^"]+)"')


# -- pure readers of the texts ----------------------------------------------


def makefile_targets(texts: list[str]) -> set[str]:
    """The rule names the Makefile texts define (variable assignments and
    special targets like .PHONY left out)."""
    return {m.group(1) for t in texts for m in RULE.finditer(t)}


def table_targets(markdown: str) -> set[str]:
    """The targets a make-targets table names: the backquoted words of each
    row's first cell."""
    rows = [ln.split("|")[1] for ln in markdown.splitlines() if ln.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`([^`]+)`", cell)}


def package_entries(pkg_dir: Path) -> tuple[set[str], set[str]]:
    """(the top level of the package as a layout writes it: `spec/`,
    `cli.py`, ...; the folders one level down: `tasks/`, ...)."""
    def folder(p: Path) -> bool:
        return p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")
    top = {f"{p.name}/" for p in pkg_dir.iterdir() if folder(p)}
    top |= {p.name for p in pkg_dir.glob("*.py") if p.name != "__init__.py"}
    nested = {f"{q.name}/" for p in pkg_dir.iterdir() if folder(p) for q in p.iterdir() if folder(q)}
    return top, nested


def layout_blocks(markdown: str) -> list[str]:
    """The fenced blocks of a page that draw src/tortoiselab/ (a line that is
    exactly that folder)."""
    return [b for b in FENCE.findall(markdown) if any(ln.strip() == "src/tortoiselab/" for ln in b.splitlines())]


def lab_kernel_release(kernel_dir: Path) -> str:
    """The upstream release of the lab kernel: kernel/SERIES names the series,
    kernel/sources/<series> pins Debian's VERSION (7.3.4-1~bpo13+1 -> 7.3.4)."""
    series = (kernel_dir / "SERIES").read_text().split()[0]
    pin = dict(ln.split("=", 1) for ln in (kernel_dir / "sources" / series).read_text().splitlines()
               if "=" in ln and not ln.startswith("#"))
    return pin["VERSION"].split("-")[0]


def quoted_lab_releases(markdown: str) -> list[str]:
    """Every kernel release a page gives as the lab kernel's: a probe or
    loss-response sample of the uml backend, and prose that puts a release
    right after "lab kernel" (not "earlier lab kernel")."""
    found = []
    for block in FENCE.findall(markdown):
        if re.search(r"^backend\s+uml\b|^backend uml,", block, re.M):
            found += re.findall(r"^kernel release\s+(\S+)", block, re.M)
            found += re.findall(r"^backend uml, clock \w+, kernel ([^,\s]+)", block, re.M)
    prose = " ".join(FENCE.sub("", markdown).split())
    found += [m.group(2) for m in LAB_KERNEL_PROSE.finditer(prose) if (m.group(1) or "").strip() != "earlier"]
    return found


def docstring_format_version(doc: str) -> int:
    """The version a store docstring's list calls "this version"."""
    hits = re.findall(r"^\s*(\d+)\s+this version", doc, re.M)
    assert len(hits) == 1, f"store.py's docstring names {len(hits)} versions as 'this version'"
    return int(hits[0])


def headings(markdown: str) -> set[str]:
    return {ln.lstrip("#").strip() for ln in markdown.splitlines() if ln.startswith("#")}


# -- the pure readers on made-up texts (so that each check can fail) --------


def test_readers_find_what_they_should():
    assert makefile_targets(["X := 1\n.PHONY: a\na: b\nb-c:\n\t@echo x: y\n"]) == {"a", "b-c"}
    assert table_targets("| target | does |\n| `a`, `b` | x `c` |\n") == {"a", "b"}
    sample = "```\nbackend          uml\nkernel release   6.12.117\n```\nthe lab kernel, 7.3.4; the earlier lab kernel 6.12.117"
    assert quoted_lab_releases(sample) == ["6.12.117", "7.3.4"]
    assert docstring_format_version("  4  old\n  5  this version: x\n") == 5
    assert FORMAT_CLAIM.findall("a record (`format_version` 4), and (format_version 5);") == ["4", "5"]


# -- the repository ----------------------------------------------------------


def test_make_targets_table_lists_every_target_and_no_other():
    mk = (REPO / "Makefile").read_text()
    texts = [mk] + [(REPO / inc).read_text() for inc in INCLUDE.findall(mk)]
    have = makefile_targets(texts)
    table = table_targets((REPO / "docs" / "make-targets.md").read_text())
    assert not have - table, f"docs/make-targets.md misses targets: {sorted(have - table)}"
    assert not table - have, f"docs/make-targets.md names targets no Makefile has: {sorted(table - have)}"


def test_every_layout_lists_every_package():
    top, nested = package_entries(PKG_DIR)
    blocks = [(p, b) for p in PAGES for b in layout_blocks(p.read_text())]
    assert blocks, "no page draws src/tortoiselab/ (docs/architecture.md, 'Repository layout')"
    for page, block in blocks:
        missing = sorted(e for e in top if not re.search(rf"(?<![\w/]){re.escape(e)}", block))
        assert not missing, f"{page.relative_to(REPO)}: the layout of src/tortoiselab/ misses {missing}"
    text = "\n".join(b for _, b in blocks)
    assert not [e for e in nested if e not in text], f"no layout names {sorted(e for e in nested if e not in text)}"


def test_kernel_releases_quoted_as_the_lab_kernels_are_its_release():
    release = lab_kernel_release(REPO / "kernel")
    bad = [(p.relative_to(REPO), r) for p in PAGES for r in quoted_lab_releases(p.read_text()) if r != release]
    assert not bad, f"the lab kernel is {release} (kernel/SERIES, kernel/sources/): pages say {bad}"


def test_store_format_version_is_the_same_in_its_docstring_and_the_docs():
    assert docstring_format_version(store.__doc__) == store.FORMAT_VERSION
    bad = [(p.relative_to(REPO), v) for p in PAGES for v in FORMAT_CLAIM.findall(p.read_text())
           if int(v) != store.FORMAT_VERSION]
    assert not bad, f"run.json's format_version is {store.FORMAT_VERSION} (host/store.py); pages say {bad}"


def test_topology_field_names_every_topology():
    desc = TopologyCfg.model_fields["name"].description
    assert topologies.names(), "no topology in spec/topologies/"
    missing = [n for n in topologies.names() if not re.search(rf"\b{n}\b", desc)]
    assert not missing, f"TopologyCfg.name's description {desc!r} misses {missing}"


def test_readme_is_short():
    n = len((REPO / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; reference material goes in docs/ (issue 40)"


@pytest.mark.parametrize("page", PAGES + [REPO / "labs" / "README.md"], ids=lambda p: p.name)
def test_relative_links_point_at_files(page):
    targets = [t.split("#")[0] for t in LINK.findall(page.read_text()) if "://" not in t and not t.startswith("#")]
    bad = [t for t in targets if t and not (page.parent / t).exists()]
    assert not bad, f"{page.relative_to(REPO)} links to missing files: {bad}"


def test_readme_sections_cited_exist():
    """A code comment or page that cites a section of the top-level README
    (README.md, "Section") names a heading it has; docs/*.md paths cited exist."""
    readme = headings((REPO / "README.md").read_text())
    bad, gone = [], []
    for f in [*PKG_DIR.rglob("*.py"), *(REPO / "tests").rglob("*.py"), *PAGES, *(REPO / "scripts").glob("*.sh")]:
        if f.name == "test_docs_facts.py":
            continue
        text = f.read_text()
        for m in README_SECTION.finditer(text):
            if text[m.start() - 1:m.start()] == "/":  # another folder's README (labs/README.md, ...)
                continue
            cited = " ".join(m.group(1).split()).lower()
            if not any(h.lower().startswith(cited) for h in readme):
                bad.append((str(f.relative_to(REPO)), m.group(1)))
        gone += [(str(f.relative_to(REPO)), d) for d in re.findall(r"docs/[\w.-]+\.md", text)
                 if not (REPO / d).exists()]
    assert not bad, f"cite README sections it does not have: {bad}"
    assert not gone, f"cite docs pages that do not exist: {gone}"
