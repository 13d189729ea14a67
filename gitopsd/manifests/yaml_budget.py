"""YAML, pass 1: limits on the event stream, before any node is built.

libyaml's composer recurses in C per level and expands aliases, so documents, aliases,
nesting, alias expansion, tags and object size are all measured here from parser events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests.bounds import check_object_size, depth_error, documents_error
from gitopsd.manifests.yaml_loader import ALLOWED_TAGS, Loader

_EXPANSION_FLOOR = 10_000
"""Alias expansion below this many nodes is always fine, whatever the ratio."""


def check_events(text: str, path: str, limits: Limits) -> None:
    """Limits the file before composing: libyaml's composer recurses in C per level."""
    budget = _Budget(text, path, limits)
    for event in yaml.parse(text, Loader=Loader):
        budget.feed(event)


@dataclass
class _Open:
    """A collection being read: its anchor and its size and height so far, aliases expanded."""

    anchor: str | None
    size: int = 1
    height: int = 0


def _offset(mark: Any) -> int:
    """A mark's character offset (libyaml's and PyYAML's marks differ in type only)."""
    return int(mark.index) if mark else 0


class _Budget:
    """Measures documents, aliases, nesting and alias expansion from parser events.

    Each anchor remembers the expanded size and height of its node, so an alias costs
    what it would expand to without anything being expanded: a billion laughs is a few
    big integers here.
    """

    def __init__(self, text: str, path: str, limits: Limits) -> None:
        self.text, self.path, self.limits = text, path, limits
        self.documents = 0
        self.aliases = 0
        self._open: list[_Open] = []
        self._anchors: dict[str, tuple[int, int]] = {}  # anchor -> (size, height)
        self._written = 0  # nodes written in the current document
        self._expanded = 0  # nodes of the current document with aliases expanded
        self._document = yaml.Event()

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self._start_document(event)
        elif isinstance(event, yaml.DocumentEndEvent):
            self._end_document(event)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            self._written += 1
            self._check_tag(event, event.tag)
            self._add(event.anchor, 1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            self._start_collection(event)
        elif isinstance(event, yaml.CollectionEndEvent):
            closed = self._open.pop()
            self._add(closed.anchor, closed.size, closed.height + 1)

    def _start_document(self, event: yaml.Event) -> None:
        self.documents += 1
        if self.documents > self.limits.max_documents:  # one file cannot hold more than all
            raise documents_error(self._where(event), self.limits.max_documents)
        self._anchors, self._written, self._expanded = {}, 0, 0
        self._document = event  # expansion errors point at the document's start

    def _end_document(self, event: yaml.Event) -> None:
        self._check_object_size(event)
        allowed = self.limits.max_expansion * self._written
        if self._expanded > max(allowed, _EXPANSION_FLOOR):
            raise self._error(
                self._document,
                f"aliases expand {self._written} written nodes to {self._expanded}, "
                f"over {self.limits.max_expansion} times as many",
                ManifestReason.ALIAS_LIMIT,
            )

    def _check_object_size(self, end: yaml.Event) -> None:
        """A document's size is its span in the file; marks count characters, not bytes."""
        start, stop = _offset(self._document.start_mark), _offset(end.end_mark)
        if (stop - start) * 4 > self.limits.max_object_bytes:  # else even 4-byte UTF-8 fits
            size = len(self.text[start:stop].encode())
            check_object_size(self._where(self._document), size, self.limits)

    def _start_collection(self, event: yaml.CollectionStartEvent) -> None:
        self._written += 1
        self._check_tag(event, event.tag)
        if len(self._open) >= self.limits.max_depth:
            raise depth_error(self._where(event), self.limits)
        self._open.append(_Open(event.anchor))

    def _alias(self, event: yaml.AliasEvent) -> None:
        self.aliases += 1
        if self.aliases > self.limits.max_aliases:
            raise self._error(
                event, f"more than {self.limits.max_aliases} alias uses", ManifestReason.ALIAS_LIMIT
            )
        if any(collection.anchor == event.anchor for collection in self._open):
            raise self._error(
                event, "an alias refers to its own enclosing node", ManifestReason.ALIAS_LIMIT
            )
        # An undefined anchor is left for the composer to report as a syntax error.
        size, height = self._anchors.get(event.anchor or "", (1, 0))
        if len(self._open) + height > self.limits.max_depth:
            raise depth_error(self._where(event), self.limits)
        self._add(None, size, height)

    def _add(self, anchor: str | None, size: int, height: int) -> None:
        """Account a finished node to its parent, or to the document if it is the root."""
        if anchor is not None:
            self._anchors[anchor] = (size, height)
        if not self._open:
            self._expanded = size
            return
        parent = self._open[-1]
        parent.size += size
        parent.height = max(parent.height, height)

    def _check_tag(self, event: yaml.Event, tag: str | None) -> None:
        if tag is not None and tag not in ALLOWED_TAGS:
            shown = tag if len(tag) <= 80 else tag[:77] + "..."
            raise self._error(
                event,
                f"tag {shown} is not allowed; only str, int, float, bool, null, map and seq are",
                ManifestReason.FORBIDDEN_TAG,
            )

    def _where(self, event: yaml.Event) -> str:
        mark = event.start_mark
        return f"{self.path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{self.path}:1"

    def _error(self, event: yaml.Event, message: str, reason: ManifestReason) -> ManifestError:
        return ManifestError(f"{self._where(event)}: {message}", reason)
