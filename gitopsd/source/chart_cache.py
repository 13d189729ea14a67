"""The charts unpacked on disk, who uses each, and what is given back (TA-04).

A chart is unpacked once per digest under a cache root (`charts/DIGEST`) and shared by the
sources that pick that digest. Each source holds what its latest revision read: its chart
(`CHART`) and the dependencies its charts fetched (`DEPENDENCIES`), each slot replaced
whole by the next read. So an entry no source holds is removed at once: a repository that
publishes a new version at every poll costs one version per source, and a deleted source
(its GitSync gone) gives back what only it held. What is held stays within the admin's
bounds, per tenant (a GitSync's namespace; every source it holds an entry for is charged
in full) and in total: past one, the least recently used entries nobody holds (an
earlier process's, adopted at start) go first, then the fetch fails with a
`quota_exceeded` error naming the bound, and the entry it brought is given back.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd.errors import SourceError, SourceReason
from gitopsd.quantities import format_size
from gitopsd.source.disk_space import bytes_under, remove_out_of_sight

CHARTS = "charts"
"""The directory of a cache root that holds the unpacked charts, one per digest."""
CHART, DEPENDENCIES = "chart", "dependencies"
"""The slots of what a source holds: its chart source's chart, its charts' dependencies."""
_UNPACKING = ".unpacking-"


@dataclass
class _Entry:
    size: int
    used: float
    """When a source last took it (time.time(): an adopted entry's is its mtime)."""
    holders: set[tuple[int, str]] = field(default_factory=set)
    """(id of the ChartUser, slot) of each holder."""


class ChartCache:
    """Every chart unpacked under the daemon's cache roots, and who holds each."""

    def __init__(self, max_bytes: int, max_bytes_per_tenant: int, roots: Iterable[Path]) -> None:
        self.max_bytes, self.max_bytes_per_tenant = max_bytes, max_bytes_per_tenant
        self.entries: dict[Path, _Entry] = {}
        self.tenants: dict[int, str] = {}
        self.keeping = False
        """Set as the daemon stops: what its sources hold stays for the next process."""
        self.lock = threading.Lock()
        for root in roots:
            self._adopt(root / CHARTS)

    def user(self, tenant: str) -> ChartUser:
        """What one source holds; `tenant` is whose share it is charged to."""
        user = ChartUser(self, tenant)
        with self.lock:
            self.tenants[id(user)] = tenant
        return user

    def take(self, user: ChartUser, slot: str, directory: Path) -> None:
        """Holds `directory` for `user` (before it is read or unpacked, so no one removes it)."""
        with self.lock:
            if id(user) not in self.tenants:
                raise SourceError("the source was retired while it fetched a chart")
            entry = self.entries.setdefault(directory, _Entry(0, time.time()))
            entry.holders.add((id(user), slot))
            entry.used = time.time()

    def charge(self, user: ChartUser, slot: str, directory: Path) -> None:
        """Measures `directory` once unpacked, and keeps every bound: else gives it back and
        raises SourceError (quota_exceeded)."""
        size = bytes_under(directory)
        with self.lock:
            if directory in self.entries:
                self.entries[directory].size = size
            over = self._over(self.tenants[id(user)])
            if over:
                self._release(directory, (id(user), slot))
        if over:
            raise SourceError(f"{directory.name[:12]}…: {over}", SourceReason.QUOTA_EXCEEDED)

    def release(self, user: ChartUser, slot: str, kept: set[Path]) -> None:
        """Gives back what `user` held in `slot` beyond `kept`."""
        holder = (id(user), slot)
        with self.lock:
            held = [path for path, entry in self.entries.items() if holder in entry.holders]
            for path in held:
                if path not in kept:
                    self._release(path, holder)

    def keep(self) -> None:
        """The daemon stops: its sources leave, and their charts stay (adopted by the next
        process, not fetched again)."""
        with self.lock:
            self.keeping = True

    def leave(self, user: ChartUser) -> None:
        with self.lock:
            for path, entry in list(self.entries.items()):
                for holder in [h for h in entry.holders if h[0] == id(user)]:
                    self._release(path, holder)
            self.tenants.pop(id(user), None)

    def held_bytes(self, tenant: str | None = None) -> int:
        """Bytes on disk: a tenant's (what its sources hold), or all."""
        with self.lock:
            return sum(entry.size for entry in self._of(tenant))

    def _release(self, path: Path, holder: tuple[int, str]) -> None:
        entry = self.entries.get(path)
        if entry is None:
            return
        entry.holders.discard(holder)
        if not entry.holders and not self.keeping:
            del self.entries[path]
            remove_out_of_sight(path, _UNPACKING)

    def _over(self, tenant: str) -> str:
        """Which bound is passed, after evicting entries nobody holds, or ""."""
        self._evict_unheld(self.max_bytes)
        tenant_bytes = sum(entry.size for entry in self._of(tenant))
        total = sum(entry.size for entry in self.entries.values())
        shown = repr(tenant) if tenant else "the configuration's sources"
        if tenant_bytes > self.max_bytes_per_tenant:
            limit = format_size(self.max_bytes_per_tenant)
            return (
                f"the charts of {shown} would take {format_size(tenant_bytes)} of cache, over "
                f"its bound of {limit} (chartCache.maxBytesPerNamespace)"
            )
        if total > self.max_bytes:
            limit = format_size(self.max_bytes)
            return (
                f"the chart cache would take {format_size(total)}, over its bound of {limit} "
                "(chartCache.maxBytes)"
            )
        return ""

    def _evict_unheld(self, bound: int) -> None:
        """Removes entries nobody holds, least recently used first, while over `bound`."""
        total = sum(entry.size for entry in self.entries.values())
        unheld = sorted((e.used, path) for path, e in self.entries.items() if not e.holders)
        for _, path in unheld:
            if total <= bound:
                return
            total -= self.entries.pop(path).size
            remove_out_of_sight(path, _UNPACKING)

    def _of(self, tenant: str | None) -> Iterator[_Entry]:
        for entry in self.entries.values():
            if tenant is None or any(self.tenants.get(h[0]) == tenant for h in entry.holders):
                yield entry

    def _adopt(self, charts: Path) -> None:
        """An earlier process's charts: nobody holds them, so they go first when over a
        bound; a chart it was unpacking when it died goes now."""
        for path in charts.iterdir() if charts.is_dir() else ():
            if path.name.startswith(_UNPACKING):
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_dir():
                self.entries[path] = _Entry(bytes_under(path), path.stat().st_mtime)


@dataclass(eq=False)
class ChartUser:
    """The charts one source holds, by slot."""

    cache: ChartCache
    tenant: str

    @contextmanager
    def reading(self, slot: str) -> Iterator[Reading]:
        """A read of a revision: what it takes replaces what the slot held."""
        reading = Reading(self, slot)
        try:
            yield reading
        finally:
            self.cache.release(self, slot, reading.taken)

    def leave(self) -> None:
        """The source is gone: what only it held is removed."""
        self.cache.leave(self)


@dataclass(eq=False)
class Reading:
    """The charts one read of a revision takes, for one slot of its source."""

    user: ChartUser
    slot: str
    taken: set[Path] = field(default_factory=set)

    def take(self, directory: Path) -> None:
        """Held before it is looked at: nobody removes it from now on."""
        self.user.cache.take(self.user, self.slot, directory)
        self.taken.add(directory)

    def charge(self, directory: Path) -> None:
        """Counted once it is unpacked; over a bound it is given back (SourceError)."""
        try:
            self.user.cache.charge(self.user, self.slot, directory)
        except SourceError:
            self.taken.discard(directory)
            raise
