"""What a file's parse came to, kept across revisions: an unchanged file costs a lookup.

An entry is the file's manifests, validated, and the first line of each document (the
document limit counts documents and names the first one over it). Manifests are shared
with whoever reads them; each keeps its body packed and hands out copies, so no reader can
change what the next one reads. A load keeps only the entries its revision used: the files
of older revisions are not held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass

from gitopsd.objects import Manifest


@dataclass(frozen=True)
class Parsed:
    manifests: tuple[Manifest, ...]
    lines: tuple[int, ...]
    """The first line of each document: how many documents the file holds, and where."""
    size: int = 0
    """The bytes a render wrote (a file's size is known from the tree)."""


class ParseCache:
    """Parses keyed by content id (a git blob sha, else sha256 of the bytes) and path."""

    def __init__(self) -> None:
        self.parses = 0
        """How many files were actually parsed (cache misses)."""
        self._entries: dict[Hashable, Parsed] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def lookup(self, key: Hashable) -> Parsed | None:
        with self._lock:
            return self._entries.get(key)

    def get(self, key: Hashable, parse: Callable[[], Parsed]) -> Parsed:
        """The entry of `key`, parsed (and kept) if there is none."""
        known = self.lookup(key)
        if known is not None:
            return known
        parsed = parse()
        with self._lock:
            self.parses += 1
            self._entries[key] = parsed
        return parsed

    def keep_only(self, keys: Collection[Hashable]) -> None:
        """Forgets every entry but those of `keys` (the revision just read)."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if k in keys}
