"""Parsed documents kept across revisions, so an unchanged file is parsed once.

Entries are kept marshalled: a caller's copy is one C call (about a third of a recursive
copy's time, which a revision pays for every unchanged file), and the cache holds compact
bytes rather than object trees.
"""

from __future__ import annotations

import marshal
import threading
from collections import OrderedDict
from collections.abc import Hashable

from gitopsd.manifests.yaml_loader import Documents

_CACHE_ENTRIES = 50_000
_FORMAT = 2
"""marshal's last format without back-references: an object a YAML alias shares is
written out each time, so every copy shares nothing (its expansion is bounded)."""


class ParseCache:
    """Parsed documents keyed by content id: a git blob sha, else sha256 of the bytes.

    Most files do not change between revisions, so each is parsed once. Entries are
    returned as fresh copies: a caller that edits a manifest body cannot corrupt the cache.
    """

    def __init__(self, max_entries: int = _CACHE_ENTRIES) -> None:
        self.parses = 0
        """How many files were actually parsed (cache misses)."""
        self._max_entries = max_entries
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()  # the daemon may load several sources at once

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def lookup(self, key: Hashable) -> Documents | None:
        with self._lock:
            packed = self._entries.get(key)
            if packed is None:
                return None
            self._entries.move_to_end(key)
        return _copy(packed)

    def store(self, key: Hashable, documents: Documents) -> Documents:
        """Remember a fresh parse and return a copy the caller owns."""
        packed = marshal.dumps(documents, _FORMAT)
        with self._lock:
            self.parses += 1
            self._entries[key] = packed
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)  # least recently used
        return _copy(packed)


def _copy(packed: bytes) -> Documents:
    documents: Documents = marshal.loads(packed)  # noqa: S302 - our own bytes, never input
    return documents
