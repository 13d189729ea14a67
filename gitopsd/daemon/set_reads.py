"""What a GitSyncSet's git generators read: each repository's revision and its directories.

A git generator's repository is read as a GitSync naming it would be: its Secret read with
the set's ServiceAccount's rights (or, without one, used only if it opts in to the URL),
its URL within the same fences (gitSyncs.allowInsecure, the network fence), its fetches
shared with the GitSyncs of that repository, ref and credentials through the fetch ledger
(and charged to the set's namespace in the git cache), and its directories listed by the
source package, within MAX_DIRECTORIES.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd.cluster import Cluster
from gitopsd.config import SourceSpec
from gitopsd.configfile import GitSyncSettings
from gitopsd.daemon.credentials import credentials_of, fingerprint
from gitopsd.daemon.gitsync_reads import GITSYNCS_ALLOW_INSECURE
from gitopsd.errors import ConfigError
from gitopsd.gitsync import spec as gitsync_spec
from gitopsd.gitsyncsets import MAX_DIRECTORIES
from gitopsd.gitsyncsets.generators import Listings
from gitopsd.gitsyncsets.spec import GitGenerator, GitSyncSet
from gitopsd.objects import ObjectKey
from gitopsd.reconcile import desired
from gitopsd.source import FetchLedger, Revision, SharedFetch, fetch
from gitopsd.source.directories import directories

Joined = tuple[Path, str, str]
"""A cached repository, a URL and a ref: one shared fetch of a set."""


@dataclass
class GitReads:
    cluster: Cluster
    settings: GitSyncSettings
    cache_dir: Path
    fetches: FetchLedger | None
    joined: dict[ObjectKey, dict[Joined, SharedFetch]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def listings(
        self, key: ObjectKey, gitsyncset: GitSyncSet, on_new_commit: Callable[[], None]
    ) -> Listings:
        """The directories of each git generator's revision, fetched now (or lately, by a
        reader of the same repository); the fetches it no longer needs are left."""
        found: dict[tuple[str, str], list[str]] = {}
        used: set[Joined] = set()
        for n, generator in enumerate(gitsyncset.git_generators()):
            spec, repositories = self._source(gitsyncset, generator, n)
            revision = self._fetch(key, spec, repositories, gitsyncset, on_new_commit)
            used.add((repositories, spec.url, spec.ref))
            listed = directories(spec, repositories, revision, MAX_DIRECTORIES)
            found[(generator.url, generator.ref)] = listed
        self._leave(key, keep=used)
        return found

    def forget(self, key: ObjectKey) -> None:
        """The set is gone (or another replica's): its fetches are left."""
        self._leave(key, keep=set())

    def _source(
        self, gitsyncset: GitSyncSet, generator: GitGenerator, n: int
    ) -> tuple[SourceSpec, Path]:
        """The generator's repository as a GitSync of the set's would read it, and the cache
        of repositories it shares with those GitSyncs (same credentials, byte for byte)."""
        spec: dict[str, object] = {"repository": generator.repository}
        if gitsyncset.service_account:
            spec["serviceAccountName"] = gitsyncset.service_account
        metadata = {"namespace": gitsyncset.namespace, "name": gitsyncset.name}
        try:
            wanted = gitsync_spec.read({"metadata": metadata, "spec": spec}, self.settings)
            home = self.cache_dir / "gitsyncsets" / gitsyncset.namespace / gitsyncset.name
            credentials = credentials_of(self.cluster, wanted, home / f"credentials-{n}")
            source = wanted.source(credentials)
            desired.check_source(source.spec, GITSYNCS_ALLOW_INSECURE)
        except ConfigError as error:
            raise ConfigError(f"GitSyncSet {gitsyncset.key}: git generator: {error}") from None
        repositories = self.cache_dir / "gitsyncs" / "repositories" / fingerprint(credentials)
        return source.spec, repositories

    def _fetch(
        self,
        key: ObjectKey,
        spec: SourceSpec,
        repositories: Path,
        gitsyncset: GitSyncSet,
        on_new_commit: Callable[[], None],
    ) -> Revision:
        if self.fetches is None:
            return fetch(spec, repositories)
        joined = (repositories, spec.url, spec.ref)
        with self.lock:
            shared = self.joined.setdefault(key, {}).get(joined)
        if shared is None:
            fresh = gitsyncset.interval_seconds / 2
            shared = self.fetches.join(spec, repositories, fresh, on_new_commit, key.namespace)
            with self.lock:
                self.joined[key][joined] = shared
        return shared.fetch()

    def _leave(self, key: ObjectKey, keep: set[Joined]) -> None:
        with self.lock:
            held = self.joined.get(key, {})
            gone = [held.pop(joined) for joined in list(held) if joined not in keep]
            if not held:
                self.joined.pop(key, None)
        for shared in gone:
            shared.leave()
