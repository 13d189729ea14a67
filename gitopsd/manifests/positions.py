"""Where a field of a manifest is written: the line of its key in the manifest's file, for a
message about that field.

Asked only when something is wrong, so nothing is kept while reading: the file is read
and composed again, once per file. A manifest whose document the file does not hold as it
was read (a render's output, an item of a `kind: List`) keeps its document's line.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from typing import Any

import yaml

from gitopsd.config import Limits
from gitopsd.errors import GitopsdError
from gitopsd.manifests.parsing import decode
from gitopsd.manifests.tree import Tree
from gitopsd.manifests.yaml_budget import check_events
from gitopsd.manifests.yaml_loader import Loader
from gitopsd.objects import Manifest, Origin

Path = Sequence[str | int]
"""A field: the keys and list indexes that lead to it from the object's root."""


class Positions:
    """The lines of fields in the files of one tree."""

    def __init__(self, tree: Tree, limits: Limits) -> None:
        self.tree, self.limits = tree, limits
        self._files: dict[str, dict[int, tuple[yaml.Node, Any]]] = {}

    def origin_of(self, manifest: Manifest, path: Path) -> Origin:
        """Where the field at `path` (or the nearest of its parents the file writes) is."""
        rel = manifest.origin.path
        if rel not in self._files:
            self._files[rel] = self._documents(rel)
        document = self._files[rel].get(manifest.origin.line)
        if document is None or document[1] != manifest.body:
            return manifest.origin
        return Origin(rel, _line(document[0], path))

    def _documents(self, rel: str) -> dict[int, tuple[yaml.Node, Any]]:
        """Each document of file `rel` by its first line: its node, and its data. The file
        is bounded as when it was parsed: it may be one never parsed (a chart's template)."""
        try:
            text = self._text(rel)
            check_events(text, rel, self.limits)
            return _documents(text, rel)
        except (GitopsdError, yaml.YAMLError):
            return {}  # not a file of manifests as written (a chart's template)

    def _text(self, rel: str) -> str:
        mode = self.tree.mode(rel)
        limit = self.limits.max_revision_bytes
        if mode is None or not stat.S_ISREG(mode) or self.tree.size(rel) > limit:
            return ""
        return decode(self.tree.read(rel, limit), rel)


def _documents(text: str, rel: str) -> dict[int, tuple[yaml.Node, Any]]:
    loader = Loader(text, rel)
    found = {}
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                found[node.start_mark.line + 1] = (node, loader.construct_document(node))
    finally:
        loader.dispose()
    return found


def _line(node: yaml.Node, path: Path) -> int:
    """The line of the key (or list item) at `path`, or of its nearest parent there."""
    line = node.start_mark.line + 1
    for part in path:
        child = _child(node, part)
        if child is None:
            break
        line, node = child
    return line


def _child(node: yaml.Node, part: str | int) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return key.start_mark.line + 1, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item = node.value[part]
        return item.start_mark.line + 1, item
    return None
