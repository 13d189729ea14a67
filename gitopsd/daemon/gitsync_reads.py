"""What serving a GitSync reads before its source runs: its Secrets, as its ServiceAccount
(its git credentials, keys, webhook token and notification providers), the cluster it
syncs into, and the checks against the daemon's other sources. Read again whole at each
change of the GitSync, and after a failure (a Secret may have been rotated meanwhile); a
served GitSync whose reading changed gets a new worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gitopsd.cluster import Cluster
from gitopsd.config import Credentials
from gitopsd.configfile import SourceConfig
from gitopsd.daemon.clusters import Clusters
from gitopsd.daemon.credentials import credentials_of, fingerprint, keys_of, webhook_token
from gitopsd.daemon.http import Webhook
from gitopsd.daemon.receivers import providers_of
from gitopsd.daemon.worker import SourceWorker
from gitopsd.daemon.writers import Writers
from gitopsd.gitsync.spec import GitSync, check_dependencies, check_parent
from gitopsd.notifications.providers import Provider
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import desired

GITSYNCS_ALLOW_INSECURE = "the daemon's configuration says gitSyncs.allowInsecure: true"
"""What permits a GitSync's file:// or http:// repository, as its refusal says."""

Running = tuple[SourceConfig, str | None, Path, str]
"""What a worker runs with: its source, who it acts as, its repositories' cache and the
cluster it syncs into. A change of any is a new worker."""


@dataclass(frozen=True)
class Reading:
    """A GitSync read to be served."""

    source: SourceConfig
    repositories: Path
    """Its cached repositories, shared with the GitSyncs that hold the same credentials."""
    token: bytes | None
    """The key its webhook's calls are signed with; None: no webhook."""
    providers: tuple[Provider, ...]
    target: Cluster
    """Where it syncs, acting as it may there, fenced as its namespace's writes are."""

    def running(self, user: str | None) -> Running:
        return self.source, user, self.repositories, self.target.name


@dataclass
class Served:
    """A GitSync whose source runs."""

    gitsync: GitSync
    source: SourceConfig
    repositories: Path
    worker: SourceWorker
    webhook: Webhook | None = None
    """Its webhook: the key calls are signed with, and the poll a signed call asks for."""

    @property
    def running(self) -> Running:
        return self.source, self.gitsync.user, self.repositories, self.worker.cluster.name


@dataclass(frozen=True)
class GitSyncReads:
    cluster: Cluster
    """The daemon's own: where GitSyncs and their Secrets are."""
    clusters: Clusters
    writers: Writers
    cache_dir: Path
    taken_parents: frozenset[tuple[str, str]] = frozenset()
    """(name, namespace) of the file sources' ApplySet parents: a GitSync may not share one."""

    def read(self, key: ObjectKey, wanted: GitSync, bodies: Mapping[ObjectKey, Body]) -> Reading:
        """GitSync `wanted` read to be served beside the GitSyncs `bodies`; a Secret it
        cannot read, or a check it fails, raises."""
        home = self.home(wanted.namespace, wanted.name)
        credentials = credentials_of(self.cluster, wanted, home / "credentials")
        source = wanted.source(credentials, *keys_of(self.cluster, wanted, home))
        fenced = self.writers.cluster_for(key.namespace)
        reading = Reading(
            source=source,
            repositories=self._repositories(credentials),
            token=webhook_token(self.cluster, wanted),
            providers=providers_of(self.cluster, wanted),
            target=self.clusters.of_gitsync(wanted, fenced, home / "cluster"),
        )
        desired.check_source(source.spec, GITSYNCS_ALLOW_INSECURE)
        check_parent(wanted, self.taken_parents)
        check_dependencies(wanted, bodies)
        return reading

    def home(self, namespace: str, name: str) -> Path:
        """A GitSync's own folder, for the files of its credentials."""
        return self.cache_dir / "gitsyncs" / namespace / name

    def _repositories(self, credentials: Credentials) -> Path:
        """Where its repositories are cached: with the GitSyncs whose credentials are the
        same, byte for byte (or none), so no GitSync reads what was fetched with
        credentials it does not hold."""
        return self.cache_dir / "gitsyncs" / "repositories" / fingerprint(credentials)
