"""Reading a user's YAML file with limits: size, UTF-8, anchor/alias
expansion, nesting depth and duplicate keys, each refused with the file's
name, where and what to do, before anything is built from it.

PyYAML's safe loader expands aliases into shared objects, so a file of a
few hundred bytes whose anchors nest nine aliases seven levels deep stands
for millions of values; any code that walks or prints the result (an error
message quoting it, a sweep expanding it) then takes megabytes or all the
memory. The composed node graph is sized first, counting every alias as
the values it stands for, and refused above a bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20  # an experiment or region file is a few KB
MAX_VALUES = 100_000  # scalars, sequences and mappings after alias expansion
MAX_DEPTH = 64
EXCERPT_CHARS = 80


class YamlFileError(ValueError):
    """A file that cannot be read as bounded YAML; the message names it."""


def cut(text: str, limit: int = EXCERPT_CHARS) -> str:
    """text, cut to `limit` characters with the number left out."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """repr(value), cut: error messages quote bad values, never whole documents."""
    return cut(repr(value), limit)


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key that appears twice in one mapping
    (the later value would silently win). A merge key (`<<: *anchor`, e.g.
    a grid that is another grid with more repetitions) is YAML's own way to
    override: the mapping's own keys win over the merged ones."""


MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            continue  # SafeConstructor.construct_mapping flattens the merge below
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {excerpt(key)} (first at line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    return []


def node_size(root: yaml.Node) -> tuple[int, int]:
    """(values, depth) of a composed document with every alias expanded;
    shared nodes are sized once (memo), so this is linear in the file even
    when the expansion is astronomical. A node inside itself (a recursive
    anchor) is refused."""
    memo: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    # iterative post-order: a deep document must not overflow Python's stack
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = [memo[id(c)] for c in _children(node)]
            memo[key] = (1 + sum(k[0] for k in kids), 1 + max((k[1] for k in kids), default=0))
            on_path.discard(key)
            continue
        if key in memo:
            continue
        if key in on_path:
            raise YamlFileError(f"line {node.start_mark.line + 1}: an anchor refers to itself; "
                                "write the value out instead of a recursive alias")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in memo)
    return memo[id(root)]


def read_yaml(path: Path, what: str = "file", max_bytes: int = MAX_BYTES, max_values: int = MAX_VALUES,
              max_depth: int = MAX_DEPTH) -> Any:
    """The document in `path`, or YamlFileError naming the file and the
    fix: too large, not UTF-8 (with the byte offset), not YAML (with line
    and column), a duplicate key, or more values or nesting than the
    bounds once anchors and aliases are expanded."""
    path = Path(path)
    try:  # non-blocking: a FIFO in the file's place is refused, it cannot hang the reader
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise YamlFileError(f"{path}: not a regular file (a FIFO, a device or a folder); give the {what} "
                                    "itself")
            if st.st_size > max_bytes:
                raise YamlFileError(f"{path}: {st.st_size} bytes; a {what} is at most {max_bytes} bytes")
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise YamlFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise YamlFileError(f"{path}: not UTF-8 text: byte {exc.start} (line {line}) is "
                            f"{data[exc.start:exc.start + 1]!r}; save the {what} as UTF-8") from None
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        values, depth = node_size(node)
        if values > max_values:
            raise YamlFileError(f"{path}: the {what} expands to {values} values through its anchors and aliases "
                                f"(at most {max_values}); write the values out, or use a sweep")
        if depth > max_depth:
            raise YamlFileError(f"{path}: the {what} nests {depth} levels deep (at most {max_depth})")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YamlFileError(f"{path}: not valid YAML{where}: {cut(str(exc.problem or exc.context), 160)}") from None
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{path}: not valid YAML: {cut(str(exc), 160)}") from None
    except YamlFileError as exc:
        raise YamlFileError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None
    finally:
        loader.dispose()
