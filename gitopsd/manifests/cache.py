"""Parsed documents kept across revisions, so an unchanged file is parsed once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from gitopsd.manifests.yaml_loader import Documents

_CACHE_ENTRIES = 50_000


class ParseCache:
    """Parsed documents keyed by content id: a git blob sha, else sha256 of the bytes.

    Most files do not change between revisions, so each is parsed once. Entries are
    returned as fresh copies: a caller that edits a manifest body cannot corrupt the cache.
    """

    def __init__(self, max_entries: int = _CACHE_ENTRIES) -> None:
        self.parses = 0
        """How many files were actually parsed (cache misses)."""
        self._max_entries = max_entries
        self._entries: OrderedDict[Hashable, Documents] = OrderedDict()
        self._lock = threading.Lock()  # the daemon may load several sources at once

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def lookup(self, key: Hashable) -> Documents | None:
        with self._lock:
            documents = self._entries.get(key)
            if documents is None:
                return None
            self._entries.move_to_end(key)
        copy: Documents = _fresh(documents)
        return copy

    def store(self, key: Hashable, documents: Documents) -> Documents:
        """Remember a fresh parse and return a copy the caller owns."""
        with self._lock:
            self.parses += 1
            self._entries[key] = documents
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)  # least recently used
        copy: Documents = _fresh(documents)
        return copy


def _fresh(data: Any) -> Any:
    """A copy sharing nothing mutable, not even YAML aliases (their expansion is bounded)."""
    if isinstance(data, dict):
        return {key: _fresh(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_fresh(item) for item in data]
    if isinstance(data, tuple):  # a cached Documents entry: (line, data)
        return tuple(_fresh(item) for item in data)
    return data  # str, int, float, bool, None: immutable
