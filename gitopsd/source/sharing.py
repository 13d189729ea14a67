"""Fetches shared by the sources that read one repository's ref with one cache.

A daemon's sources that name the same URL and ref, and keep it in the same cached
repository (a GitSync shares one only with GitSyncs holding the same credentials), would
each ask the remote for the same commit on their own interval. The ledger remembers what
each (repository, ref) held when it was last fetched: a source's fetch begun within its
`fresh_seconds` is not repeated, and the one that finds a new commit tells the others at
once, so they read it without fetching again. A webhook or a request to reconcile now
`forget`s the record: the next fetch goes to the remote. The ledger also tells the daemon's
record of cached repositories (`git_cache`) who reads each, and a fetch writes at most the
room its tenant has left there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.git_cache import GitCache
from gitopsd.source.policy import mask_url
from gitopsd.source.revision import Revision, fetch
from gitopsd.source.runner import repository_path

Key = tuple[Path, str]
"""A cached repository and a ref in it."""


@dataclass(frozen=True)
class _Fetched:
    revision: Revision
    started: float
    """time.monotonic() when the fetch began: it holds every commit pushed before then."""


@dataclass
class FetchLedger:
    """What each cached repository's refs held when last fetched, and who reads them."""

    records: dict[Key, _Fetched] = field(default_factory=dict)
    forgotten: dict[Key, float] = field(default_factory=dict)
    """When each ref was last forgotten: a fetch begun before then is never fresh again."""
    readers: dict[Key, dict[int, Callable[[], None]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    git: GitCache | None = None
    """The daemon's record of the repositories its sources read on disk, and its bounds."""

    def join(
        self,
        spec: SourceSpec,
        cache_dir: Path,
        fresh_seconds: float,
        on_new_commit: Callable[[], None],
        tenant: str = "",
    ) -> SharedFetch:
        """A source's way to its ref: `on_new_commit` hears of a commit another reader
        fetched (the source polls to read it); its repository is charged to `tenant`."""
        key = (repository_path(spec, cache_dir), spec.ref)
        shared = SharedFetch(self, key, spec, cache_dir, fresh_seconds, tenant)
        with self.lock:
            self.readers.setdefault(key, {})[id(shared)] = on_new_commit
        if self.git:
            self.git.read(key[0], id(shared), tenant)
        return shared

    def recent(self, key: Key, since: float) -> Revision | None:
        with self.lock:
            record = self.records.get(key)
            since = max(since, self.forgotten.get(key, float("-inf")))
        return record.revision if record is not None and record.started >= since else None

    def record(self, key: Key, fetched: _Fetched, by: SharedFetch) -> None:
        """Keeps a finished fetch, and tells the other readers when its commit is new."""
        with self.lock:
            previous = self.records.get(key)
            if previous is not None and previous.started > fetched.started:
                return  # a fetch begun later finished first: it knows more
            self.records[key] = fetched
            new = previous is not None and previous.revision.sha != fetched.revision.sha
            others = [
                tell for reader, tell in self.readers.get(key, {}).items() if reader != id(by)
            ]
        for tell in others if new else ():
            tell()

    def forget(self, key: Key) -> None:
        """Every fetch begun until now is stale, the one in flight too (it may have begun
        before the push that was announced): the next fetch goes to the remote. The record
        stays, so that fetch still knows whether its commit is new to the other readers."""
        with self.lock:
            self.forgotten[key] = time.monotonic()

    def leave(self, key: Key, reader: SharedFetch) -> None:
        with self.lock:
            readers = self.readers.get(key, {})
            readers.pop(id(reader), None)
            if not readers:
                self.readers.pop(key, None)
                self.records.pop(key, None)
                self.forgotten.pop(key, None)
        if self.git:
            self.git.leave(key[0], id(reader))


@dataclass(eq=False)
class SharedFetch:
    """One source's fetches of its ref, through the ledger."""

    ledger: FetchLedger
    key: Key
    spec: SourceSpec
    cache_dir: Path
    fresh_seconds: float
    """How old a fetch by another reader may be for this source to use its commit."""
    tenant: str = ""

    def fetch(self) -> Revision:
        """The ref's commit: one fetched within `fresh_seconds`, or a fetch now (under the
        repository's lock, so readers that wait on one fetch use its commit), which may
        write no more than its tenant's room in the git cache."""
        git = self.ledger.git
        if git is None:
            return fetch(self.spec, self.cache_dir, shared=self)
        limits = self.spec.limits
        room = git.room(self.tenant)
        bounded = replace(limits, max_fetch_bytes=min(limits.max_fetch_bytes, room))
        try:
            return fetch(replace(self.spec, limits=bounded), self.cache_dir, shared=self)
        except SourceError as error:
            if error.reason != SourceReason.TOO_LARGE or room >= limits.max_fetch_bytes:
                raise
            raise self._refused(git.passed(self.tenant, room + 1) or str(error)) from None
        finally:
            git.sweep()  # what was given back while this git ran

    def recent(self) -> Revision | None:
        return self.ledger.recent(self.key, time.monotonic() - self.fresh_seconds)

    def fetched(self, revision: Revision, started: float) -> None:
        """Keeps the fetch, once its repository is within the git cache's bounds."""
        if self.ledger.git:
            try:
                self.ledger.git.charge(self.key[0], self.tenant)
            except SourceError as error:
                raise self._refused(str(error)) from None
        self.ledger.record(self.key, _Fetched(revision, started), self)

    def _refused(self, bound: str) -> SourceError:
        url = mask_url(self.spec.url)
        return SourceError(f"git source {url}: {bound}", SourceReason.QUOTA_EXCEEDED)

    def forget(self) -> None:
        """The next fetch of this ref, by any reader, goes to the remote (a push was
        announced, or someone asked to reconcile now)."""
        self.ledger.forget(self.key)

    def leave(self) -> None:
        self.ledger.leave(self.key, self)
