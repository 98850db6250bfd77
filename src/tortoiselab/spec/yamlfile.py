"""Reading a user's YAML file with limits: size, UTF-8, anchor/alias
expansion, nesting depth, digits of a number and duplicate keys, each
refused with the file's name, where and what to do, before anything is
built from it.

Depth and digits are checked on PyYAML's events (yaml.parse: a state
machine, no recursion) before the document is composed: PyYAML's composer
recurses once per level, so 1,000 nested `[` in a 2 KB file were a
RecursionError traceback, and `seed:` of 4,400 digits was Python's
"Exceeds the limit (4300 digits)" naming neither file nor field.

PyYAML's safe loader expands aliases into shared objects, so a file of a
few hundred bytes whose anchors nest nine aliases seven levels deep stands
for millions of values; any code that walks or prints the result (an error
message quoting it, a sweep expanding it) then takes megabytes or all the
memory. The composed node graph is sized first, counting every alias as
the values it stands for, and refused above a bound.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tortoiselab.spec import regular

MAX_BYTES = 1 << 20  # an experiment or region file is a few KB
MAX_VALUES = 100_000  # scalars, sequences and mappings after alias expansion
MAX_DEPTH = 64
MAX_INT_DIGITS = 100  # a whole number's digits (a seed is below 2**63: 19); Python's int() stops at 4,300
# YAML 1.1's int forms as PyYAML resolves them (binary, octal, decimal, hex, base 60), underscores allowed
_INT = re.compile(r"[-+]?(?:0b[0-1_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*(?::[0-5]?[0-9])*)\Z")
INT_TAG = "tag:yaml.org,2002:int"
SCAN_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML was built with it
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


def _field(stack: list[list]) -> str:
    """The field a node sits in, as error messages name fields: keys joined
    by dots, sequence items by their index (path.rtt_ms, sweep.server.cc.1)."""
    return ".".join(str(f[1]) for f in stack if f[1] is not None) or "(the document)"


def _enter(stack: list[list], event: yaml.Event) -> None:
    """A node starts inside the innermost collection: a mapping's key (its
    text, when a scalar) or value, or a sequence's next item."""
    if not stack:
        return
    frame = stack[-1]  # [is a mapping, key or index, wants a key]
    if frame[0]:
        if frame[2]:
            frame[1] = event.value if isinstance(event, yaml.ScalarEvent) else "?"
        frame[2] = not frame[2]
    else:
        frame[1] = 0 if frame[1] is None else frame[1] + 1


def scan_bounds(text: str, max_depth: int = MAX_DEPTH, max_digits: int = MAX_INT_DIGITS) -> None:
    """Refuse (YamlFileError, with line, field and fix) a document nesting
    deeper than max_depth, or holding a whole number of more than max_digits
    digits, from its events alone: nothing is composed or converted, and
    nothing recurses (yaml.parse is a state machine; libyaml's where PyYAML
    has it). The scan stops at the first level too deep: the scanners' cost
    grows with the square of the open levels (100,000 nested `[` took
    libyaml 5 minutes). yaml.YAMLError for a document that does not parse."""
    stack: list[list] = []  # the open collections, outermost first
    for event in yaml.parse(text, Loader=SCAN_LOADER):
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        _enter(stack, event)
        if len(stack) + 1 > max_depth:  # a value is a level, as node_size counts them
            raise YamlFileError(f"line {event.start_mark.line + 1}: {cut(_field(stack), 40)}: the file nests more "
                                f"than {max_depth} levels deep; write the values out flat (the shipped files "
                                "nest 9 at most)")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            stack.append([isinstance(event, yaml.MappingStartEvent), None, True])
        elif isinstance(event, yaml.ScalarEvent):
            _check_digits(event, stack, max_digits)


def _check_digits(event: yaml.ScalarEvent, stack: list[list], max_digits: int) -> None:
    """A scalar PyYAML would make a whole number (plain, or tagged !!int)
    of more than max_digits digits: refused, naming the field."""
    if not (event.tag == INT_TAG or (not event.style and event.implicit[0])):  # plain: style None, or '' (libyaml)
        return
    value = event.value.strip()
    digits = len(value.lstrip("+-").replace("_", ""))
    if digits > max_digits and _INT.fullmatch(value):
        raise YamlFileError(f"line {event.start_mark.line + 1}: {_field(stack)}: a whole number of {digits:,} digits; "
                            f"at most {max_digits} are accepted (a seed is below 2**63, 19 digits): give a smaller "
                            "value")


def read_yaml(path: Path, what: str = "file", max_bytes: int = MAX_BYTES, max_values: int = MAX_VALUES,
              max_depth: int = MAX_DEPTH) -> Any:
    """The document in `path`, or YamlFileError naming the file and the
    fix: too large, not UTF-8 (with the byte offset), not YAML (with line
    and column), a duplicate key, or more values or nesting than the
    bounds once anchors and aliases are expanded."""
    path = Path(path)
    try:  # non-blocking: a FIFO in the file's place is refused, it cannot hang the reader (spec/regular.py)
        with regular.opened(path) as (fh, st):
            if st.st_size > max_bytes:
                raise YamlFileError(f"{path}: {st.st_size} bytes; a {what} is at most {max_bytes} bytes")
            data = regular.read(fh, max_bytes + 1)
    except regular.NotRegularFile:
        raise YamlFileError(f"{path}: not a regular file (a FIFO, a device or a folder); give the {what} "
                            "itself") from None
    except OSError as exc:
        raise YamlFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise YamlFileError(f"{path}: not UTF-8 text: byte {exc.start} (line {line}) is "
                            f"{data[exc.start:exc.start + 1]!r}; save the {what} as UTF-8") from None
    return loads(text, path, what, max_values, max_depth)


def loads(text: str, path: Path | str, what: str = "file", max_values: int = MAX_VALUES,
          max_depth: int = MAX_DEPTH) -> Any:
    """The document in `text` (read from `path`, which messages name) with
    read_yaml's bounds but the file's size: depth and digits first from its
    events (scan_bounds), then values after alias expansion, then built."""
    path = Path(path)
    loader = _UniqueKeyLoader(text)
    try:
        scan_bounds(text, max_depth)
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
