"""The git repositories cached on disk, who reads each, and what is given back (TA-04).

A git source keeps its URL's bare repository under its cache directory (one per URL and
set of credentials), shared by the sources that read it. The ledger of fetches (`sharing`)
tells this record who reads each: a repository nobody reads any more (its last GitSync
deleted, or its URL changed) is removed at once, or once the git running in it ends. What
is read stays within the admin's bounds, per tenant (a GitSync's namespace; a repository
counts in full for each tenant reading it) and in total. A fetch may write only the room
its tenant has left (its file-size bound); past a bound after it, the repositories an
earlier process left go first, least recently used, then the fetch fails with a
`quota_exceeded` error naming the bound, and its repository is removed (the next fetch
clones it afresh).
"""

from __future__ import annotations

import fcntl
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd.errors import SourceError, SourceReason
from gitopsd.quantities import format_size
from gitopsd.source.disk_space import bytes_under, remove_out_of_sight

_REMOVING = ".removing-"


@dataclass
class _Repository:
    size: int
    used: float
    """When it was last fetched into (time.time(): an adopted one's is its mtime)."""
    readers: dict[int, str] = field(default_factory=dict)
    """The tenant of each source that reads it, by the id of its reader."""


class GitCache:
    """Every repository cached under the daemon's cache roots, and who reads each."""

    def __init__(self, max_bytes: int, max_bytes_per_tenant: int, roots: Iterable[Path]) -> None:
        self.max_bytes, self.max_bytes_per_tenant = max_bytes, max_bytes_per_tenant
        self.repositories: dict[Path, _Repository] = {}
        self.given_back: set[Path] = set()
        """Repositories nobody reads, whose removal waits for the git running in them."""
        self.keeping = False
        """Set as the daemon stops: what its sources read stays for the next process."""
        self.lock = threading.Lock()
        for root in roots:
            self._adopt(root)

    def read(self, repository: Path, reader: int, tenant: str) -> None:
        with self.lock:
            entry = self.repositories.setdefault(repository, _Repository(0, time.time()))
            entry.readers[reader] = tenant
            self.given_back.discard(repository)

    def leave(self, repository: Path, reader: int) -> None:
        """The reader is gone: a repository nobody else reads is removed."""
        with self.lock:
            entry = self.repositories.get(repository)
            if entry is not None:
                entry.readers.pop(reader, None)
                if not entry.readers and not self.keeping:
                    self.given_back.add(repository)
            self._remove_given_back()

    def keep(self) -> None:
        """The daemon stops: its sources leave, and their repositories stay (adopted by the
        next process, not cloned again)."""
        with self.lock:
            self.keeping = True

    def sweep(self) -> None:
        """Removes what was given back while a git ran in it (call with no lock held)."""
        with self.lock:
            self._remove_given_back()

    def room(self, tenant: str) -> int:
        """The bytes a fetch for `tenant` may write before its bound or the total is passed
        (repositories nobody reads go first to make room)."""
        with self.lock:
            self._evict_unread(self.max_bytes)
            return max(min(bound - used for used, bound, *_ in self._bounds(tenant)), 0)

    def charge(self, repository: Path, tenant: str) -> None:
        """Measures `repository` after a fetch (its lock held), and keeps every bound: else
        removes it and raises SourceError (quota_exceeded)."""
        size = bytes_under(repository)
        with self.lock:
            entry = self.repositories.get(repository)
            if entry is None:
                return  # given back while it fetched: removed once its lock is free
            entry.size, entry.used = size, time.time()
            self._evict_unread(self.max_bytes)
            over = self._passed(tenant)
            if over:
                entry.size = 0
                remove_out_of_sight(repository, _REMOVING)
        if over:
            raise SourceError(over, SourceReason.QUOTA_EXCEEDED)

    def passed(self, tenant: str, more: int) -> str:
        """Which bound `tenant`'s repositories, or all of them, pass with `more` bytes, or ""."""
        with self.lock:
            return self._passed(tenant, more)

    def _passed(self, tenant: str, more: int = 0) -> str:
        for used, bound, what, setting in self._bounds(tenant):
            if used + more > bound:
                taken = format_size(used) if not more else f"more than {format_size(bound)}"
                return (
                    f"{what} would take {taken} of cache, over its bound of "
                    f"{format_size(bound)} ({setting})"
                )
        return ""

    def _bounds(self, tenant: str) -> list[tuple[int, int, str, str]]:
        """(bytes used, bound, whose, setting) of `tenant`'s bound and the total's."""
        shown = repr(tenant) if tenant else "the configuration's sources"
        return [
            (
                self._bytes(tenant),
                self.max_bytes_per_tenant,
                f"the git repositories of {shown}",
                "gitCache.maxBytesPerNamespace",
            ),
            (self._bytes(None), self.max_bytes, "the git cache", "gitCache.maxBytes"),
        ]

    def held_bytes(self, tenant: str | None = None) -> int:
        with self.lock:
            return self._bytes(tenant)

    def _bytes(self, tenant: str | None) -> int:
        return sum(entry.size for entry in self._of(tenant))

    def _of(self, tenant: str | None) -> Iterator[_Repository]:
        for entry in self.repositories.values():
            if tenant is None or tenant in entry.readers.values():
                yield entry

    def _remove_given_back(self) -> None:
        for repository in list(self.given_back):
            if self._remove_if_free(repository):
                self.given_back.discard(repository)

    def _evict_unread(self, bound: int) -> None:
        """Removes repositories nobody reads, least recently used first, while over `bound`."""
        total = self._bytes(None)
        unread = sorted((e.used, path) for path, e in self.repositories.items() if not e.readers)
        for _, path in unread:
            if total <= bound:
                return
            size = self.repositories[path].size
            if self._remove_if_free(path):
                total -= size

    def _remove_if_free(self, repository: Path) -> bool:
        """Removes a repository nobody reads, unless a git runs in it (this process's or
        another's, as the CLI's): it holds the repository's lock."""
        try:
            with lock_path(repository).open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.repositories.pop(repository, None)
                remove_out_of_sight(repository, _REMOVING)
        except BlockingIOError:
            return False
        except OSError:
            self.repositories.pop(repository, None)  # its directory is gone already
        return True

    def _adopt(self, root: Path) -> None:
        """An earlier process's repositories: nobody reads them, so they go first when over
        a bound; one it was removing when it died goes now."""
        for path in root.iterdir() if root.is_dir() else ():
            if path.name.startswith(_REMOVING):
                shutil.rmtree(path, ignore_errors=True)
            elif path.suffix == ".git" and path.is_dir():
                self.repositories[path] = _Repository(bytes_under(path), path.stat().st_mtime)


def lock_path(repository: Path) -> Path:
    """The file whose lock one git at a time holds per cached repository."""
    return repository.with_suffix(".lock")
