"""YAML, pass 2: building the data with a safe loader narrowed to JSON-like core types.

Pass 1 (`yaml_budget`) has already bounded the file; this pass refuses what the narrowed
loader cannot build (explicit tags, duplicate keys) with the file and line.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

from gitopsd.errors import ManifestError, ManifestReason

try:  # libyaml parses several times faster; the pure-Python parser behaves the same.
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

Documents = list[tuple[int, Any]]
"""Parsed documents of one file: (1-based start line, data)."""

CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset(
    {"!"} | {CORE + name for name in ("str", "int", "float", "bool", "null", "map", "seq")}
)
MERGE_TAG = CORE + "merge"
# Like kubectl, dates stay strings; `=` (the YAML 1.1 value key) is a plain string too.
_STRING_LIKE = frozenset({CORE + "timestamp", CORE + "value"})


class Loader(_BaseLoader):
    """A safe loader narrowed to JSON-like core types that rejects duplicate keys."""

    def __init__(self, text: str, path: str = "<string>") -> None:
        super().__init__(text)
        self.path = path
        self._checked: set[yaml.MappingNode] = set()

    def construct_document(self, node: yaml.Node) -> Any:
        self._checked = set()
        return super().construct_document(node)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Flattening rewrites the node with merged keys, so check each one beforehand, once.
        if node not in self._checked:
            self._checked.add(node)
            self._reject_duplicate_keys(node)
        super().flatten_mapping(node)

    def _reject_duplicate_keys(self, node: yaml.MappingNode) -> None:
        """PyYAML keeps the last of two equal keys silently (yaml/pyyaml#165); we refuse."""
        first_lines: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = "<<" if key_node.tag == MERGE_TAG else self.construct_object(key_node)
            if not isinstance(key, Hashable):
                continue  # construct_mapping reports unhashable keys
            line = key_node.start_mark.line + 1
            if key in first_lines:
                raise ManifestError(
                    f"{self.path}:{line}:{key_node.start_mark.column + 1}: duplicate key "
                    f"{shown_key(key)} at lines {first_lines[key]} and {line}",
                    ManifestReason.DUPLICATE_KEY,
                )
            first_lines[key] = line


def _forbidden_tag(loader: Loader, node: yaml.Node) -> Any:
    mark = node.start_mark
    raise ManifestError(
        f"{loader.path}:{mark.line + 1}:{mark.column + 1}: tag {node.tag[:80]} is not allowed",
        ManifestReason.FORBIDDEN_TAG,
    )


def _merge_as_text(loader: Loader, node: yaml.ScalarNode) -> str:
    # `<<` outside a key position is just text; merge keys are handled by flatten_mapping.
    return loader.construct_yaml_str(node)


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _STRING_LIKE]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
# Explicit tags were refused in pass 1; this narrow table is the second line of defence.
Loader.yaml_constructors = {
    tag: constructor
    for tag, constructor in _BaseLoader.yaml_constructors.items()
    if tag in ALLOWED_TAGS
}
Loader.yaml_multi_constructors = {}
Loader.add_constructor(None, _forbidden_tag)
Loader.add_constructor(MERGE_TAG, _merge_as_text)


def construct(text: str, path: str) -> Documents:
    """Drive the loader by hand so each document's start line is known."""
    loader = Loader(text, path)
    documents: Documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            data = _construct_document(loader, node, f"{path}:{line}")
            if data is not None:
                documents.append((line, data))
    finally:
        loader.dispose()
    return documents


def _construct_document(loader: Loader, node: yaml.Node, where: str) -> Any:
    try:
        return loader.construct_document(node)
    except ValueError:  # int() refuses more than 4300 digits
        raise ManifestError(f"{where}: a number is too large", ManifestReason.INVALID) from None


def shown_key(key: Any) -> str:
    """A key for an error message: keys may be named, but only briefly."""
    shown = repr(key)
    return shown if len(shown) <= 80 else shown[:77] + "..."
