"""What the cached repositories' commits were lately read to hold, for the next reader.

A commit's tree and a blob never change, so a listing (by commit, paths and limit) or a
content (by blob id) read once holds for every later reader of the same cached
repository, and a repository is shared only by sources that may read each other's
commits (the same URL and credentials). Sources that follow one ref read its new commit
at the same moment: without this, each of them ran the same `git ls-tree` and `git
cat-file`, one at a time under the repository's lock. The cache is small and bounded in
bytes: it serves that moment, not the daemon's lifetime.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from pathlib import Path

from gitopsd.source.listing import Entry

MAX_BYTES = 4 << 20
"""What the cache holds at most (a listing counted at ENTRY_BYTES an entry)."""
ENTRY_BYTES = 200
"""A listed entry's rough cost in memory: its path, blob id and their objects."""


class RecentReads:
    """Listings and blob contents, least recently used first out, within `max_bytes`."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._held: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def listing(
        self, repo: Path, sha: str, paths: tuple[str, ...], limit: int
    ) -> dict[str, Entry] | None:
        """A copy of the listing of `paths` in commit `sha`, made within `limit` entries."""
        found = self._get(("listing", repo, sha, paths, limit))
        return dict(found) if isinstance(found, dict) else None

    def keep_listing(
        self, repo: Path, sha: str, paths: tuple[str, ...], limit: int, found: Mapping[str, Entry]
    ) -> None:
        self._keep(("listing", repo, sha, paths, limit), dict(found), ENTRY_BYTES * len(found))

    def contents(self, repo: Path, blobs: list[str]) -> dict[str, bytes]:
        """The contents held of `blobs` (those not held are missing from the answer)."""
        held = {blob: self._get(("blob", repo, blob)) for blob in blobs}
        return {blob: data for blob, data in held.items() if isinstance(data, bytes)}

    def keep_contents(self, repo: Path, contents: Mapping[str, bytes]) -> None:
        for blob, data in contents.items():
            self._keep(("blob", repo, blob), data, len(data))

    def _get(self, key: Hashable) -> object:
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return None
            self._held.move_to_end(key)
            return held[0]

    def _keep(self, key: Hashable, value: object, size: int) -> None:
        if size > self.max_bytes // 4:
            return  # one read this large would push out everything else
        with self._lock:
            previous = self._held.pop(key, None)
            self._bytes += size - (previous[1] if previous else 0)
            self._held[key] = (value, size)
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._held.popitem(last=False)
                self._bytes -= dropped


RECENT_READS = RecentReads()
"""The process's: every tree of every source reads through it."""
