"""Operator mode: GitSync objects served as sources, by the controller pattern.

The GitSyncs are watched (`gitsyncs`: an informer per served namespace, or one for all);
a change of one (not of its status) puts its key on a de-duplicating queue, and so does
each poll and drift check of its source. One thread takes the keys and reconciles each
GitSync: its finalizer (`lifecycle`), its credentials (`credentials`), its source's worker
(started, replaced when its spec changed, retired when it is suspended or gone), then its
status (`publisher`). A key that fails is queued again after a backoff, by the daemon's
clock. Only the leader writes; a standby keeps its caches warm, as for file sources. With
sharding, a replica serves only the GitSyncs of its share (`writers`), and only those of
its shard label.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from gitopsd import gitsync
from gitopsd.cluster import Cluster
from gitopsd.cluster.shards import SHARD_LABEL
from gitopsd.cluster.watches import Watches
from gitopsd.configfile import GitSyncSettings
from gitopsd.daemon.clock import Clock
from gitopsd.daemon.clusters import Clusters
from gitopsd.daemon.gitsync_reads import GitSyncReads, Reading, Served
from gitopsd.daemon.gitsyncs import GitSyncs, webhook_key
from gitopsd.daemon.http import Webhook
from gitopsd.daemon.lifecycle import Lifecycle, finalizer_joined
from gitopsd.daemon.notifier import Notifier
from gitopsd.daemon.publisher import StatusPublisher
from gitopsd.daemon.queue import Pool, Retries, WorkQueue
from gitopsd.daemon.quotas import Holdings, check_git_syncs
from gitopsd.daemon.registry import Registry
from gitopsd.daemon.retiring import Retirements
from gitopsd.daemon.worker import SourceWorker
from gitopsd.daemon.writers import Writers
from gitopsd.errors import ConfigError, GitopsdError
from gitopsd.gitsync.spec import GitSync, read
from gitopsd.gitsync.status import SourceReport, unready_status
from gitopsd.metrics import Recorder
from gitopsd.objects import Body, ObjectKey
from gitopsd.source import ChartCache, FetchLedger

log = logging.getLogger("gitopsd.gitsync")
REREAD_SECONDS = 10.0
"""At most one read of a GitSync's Secrets per this for webhook calls it refuses."""


@dataclass
class GitSyncController:
    settings: GitSyncSettings
    cluster: Cluster
    recorder: Recorder
    cache_dir: Path
    writers: Writers
    """Which GitSyncs this replica serves, and the fence of each one's writes."""
    stopping: threading.Event
    clock: Clock
    """Runs the polls of its GitSyncs' sources, and their retries after a backoff."""
    sources: Registry
    """Every source the daemon runs: a GitSync's joins while it is served."""
    pool: Pool
    """The threads that run every source's polls."""
    watches: Watches
    """The informers shared by the daemon's sources."""
    notifier: Notifier  # where its GitSyncs' notices go: to their providers, and the daemon's
    clusters: Clusters  # where each GitSync syncs: the daemon's cluster, or another
    fetches: FetchLedger | None = None
    """The fetches shared by the sources of one repository, ref and credentials."""
    charts: ChartCache | None = None
    """The charts its GitSyncs hold on disk, each charged to its namespace."""
    taken_parents: frozenset[tuple[str, str]] = frozenset()
    """(name, namespace) of the file sources' ApplySet parents: a GitSync may not share one."""
    holdings: Holdings = field(default_factory=Holdings)
    """Each namespace's share of the daemon, and what its GitSyncs hold of it."""
    served: dict[ObjectKey, Served] = field(default_factory=dict)
    queue: WorkQueue = field(default_factory=WorkQueue)
    """GitSyncs to look at: changed, or their source reported."""
    changed: set[ObjectKey] = field(default_factory=set)
    """Those of the queue whose object changed (or whose backoff ended): read again whole,
    Secrets included; the others only have their status written."""
    reread_at: dict[ObjectKey, float] = field(default_factory=dict)
    """When a refused webhook call last had its GitSync read again (monotonic seconds)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.reads = GitSyncReads(
            self.cluster, self.clusters, self.writers, self.cache_dir, self.taken_parents
        )
        self.status = StatusPublisher(self.writers)
        self.lifecycle = Lifecycle(self.writers, self.clusters.of_gitsync)
        self.retirements = Retirements(ended=self._reread)
        self.retries = Retries(self.clock.timers("gitsync-retries"), again=self._reread)
        """Those that failed, each read again at the end of its backoff."""
        self.gitsyncs = GitSyncs(
            self.cluster, self.settings.namespaces, self._changed, self.stopping
        )

    def start(self) -> None:
        self.gitsyncs.start()
        threading.Thread(target=self._run, name="gitsync-controller", daemon=True).start()

    def ready(self) -> bool:
        return self.gitsyncs.synced()

    def requeue_all(self) -> None:
        """A new leader (with sharding: a replica that starts writing for its share) reads
        every GitSync again, and writes its status and finalizer afresh."""
        self.status.forget_all()
        keys = set(self.gitsyncs.bodies())
        with self.lock:
            self.changed |= keys
        self.queue.add_all(keys)

    def reshard(self) -> None:
        """This replica's share changed: the GitSyncs that left it retire, those that joined
        it start; those it keeps go on undisturbed (their Secrets are not read again)."""
        with self.lock:
            served = set(self.served)
        bodies = self.gitsyncs.bodies()
        moved = {key for key, body in bodies.items() if (key in served) != self._serves(key, body)}
        with self.lock:
            self.changed |= moved
        self.queue.add_all(moved)

    def _changed(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        if finalizer_joined(previous, body):
            self.queue.add(key)  # the daemon's own hold: nothing it serves changed
        else:
            self._reread(key)

    def _reported(self, key: ObjectKey) -> None:
        """A poll or check ended: its status is written; after a failure the GitSync is read
        whole, so a rotated credential is used by the next poll."""
        with self.lock:
            served = self.served.get(key)
        if served is not None and served.worker.report.failure is not None:
            self._reread(key)
        else:
            self.queue.add(key)

    def _reread(self, key: ObjectKey) -> None:
        with self.lock:
            self.changed.add(key)
        self.queue.add(key)

    def _refused(self, key: ObjectKey) -> None:
        """A webhook call failed its signature: the token is read again (its Secret may
        have been rotated), at most once in REREAD_SECONDS, whoever keeps calling."""
        now = time.monotonic()
        with self.lock:
            if now < self.reread_at.get(key, float("-inf")) + REREAD_SECONDS:
                return
            self.reread_at[key] = now
        self._reread(key)

    def stop(self) -> None:
        """Looks at no GitSync more (shutdown): the thread that takes them ends."""
        self.queue.close()

    def _run(self) -> None:
        while not self.stopping.is_set():
            keys = self.queue.take()
            with self.lock:
                changed, self.changed = self.changed & keys, self.changed - keys
            for key in sorted(keys):
                if self.stopping.is_set():
                    return
                if key in changed:
                    self._sync_safely(key)
                else:
                    self._publish(key)

    def _publish(self, key: ObjectKey) -> None:
        """Writes the status its source's report makes: a poll's or a check's end costs no
        read of the GitSync's Secrets."""
        body = self._body(key)
        with self.lock:
            served = self.served.get(key)
        if body is not None and served is not None:
            self.status.report(key, body, served.worker.report, suspended=False)

    def _sync_safely(self, key: ObjectKey) -> None:
        """Reconciles one GitSync; a failure is logged and retried with backoff."""
        try:
            self._sync(key)
        except GitopsdError as error:
            self._retry_later(key, error)
        except Exception:  # a bug must not end the controller
            log.exception("GitSync %s/%s failed unexpectedly", key.namespace, key.name)
            self._retry_later(key, None)
        else:
            self.retries.succeeded(key)

    def _retry_later(self, key: ObjectKey, error: GitopsdError | None) -> None:
        delay = self.retries.failed(key)
        if error is not None:
            where = {"source": f"{key.namespace}/{key.name}", "stage": str(error.stage)}
            log.error("%s; retrying in %.1f s", error, delay, extra=where)

    def _sync(self, key: ObjectKey) -> None:
        body = self._body(key)
        if body is not None and not self._serves(key, body):
            if self._retire(key):  # another replica's (or shard's) now
                self.status.forget(key)
                self.recorder.forget(f"{key.namespace}/{key.name}")
            return
        if body is None:  # deleted: its source, files and metric series go with it
            self._retire(key)
            self.status.forget(key)
            shutil.rmtree(self.reads.home(key.namespace, key.name), ignore_errors=True)
            self.recorder.forget(f"{key.namespace}/{key.name}")
            return
        try:
            wanted = read(body, self.settings)
        except ConfigError as error:
            self._retire(key)
            metadata = body["metadata"]
            if metadata.get("deletionTimestamp"):
                policy = (metadata.get("annotations") or {}).get(gitsync.DELETE_POLICY_ANNOTATION)
                skipped = f"its spec is invalid, so nothing was pruned: {error}"
                self.lifecycle.release(body, skipped if policy == "prune" else "")
                return
            self.status.failure(key, body, error)
            return
        if wanted.deleting:
            self._retire(key)
            self.status.forget(key)
            if self.retirements.pending(key):
                return  # withdrawn once its reconcile in flight ends: read again then
            self.lifecycle.finalize(body, wanted, self.reads.home(key.namespace, key.name))
            return
        if not wanted.finalized:
            self.lifecycle.hold(body)
        if wanted.suspend:
            retired = self._retire(key)
            last = retired.report if retired else SourceReport(finished=1)
            self.status.report(key, body, last, suspended=True)
            return
        self._serve(key, body, wanted)

    def unready_elsewhere(self, name: str) -> str:
        """Why GitSync `name` (namespace/name), not served here (with sharding: maybe by
        another replica), is not ready, from its status."""
        namespace, _, name = name.partition("/")
        return unready_status(self._body(ObjectKey(gitsync.GROUP, gitsync.KIND, namespace, name)))

    def _serves(self, key: ObjectKey, body: Body) -> bool:
        return self._serves_label(body) and self.writers.serves(key.namespace)

    def _serves_label(self, body: Body) -> bool:
        """Its shard label is this daemon's gitSyncs.shard (both none, or equal)."""
        labels = body["metadata"].get("labels") or {}
        return labels.get(SHARD_LABEL) == self.settings.shard

    def _body(self, key: ObjectKey) -> Body | None:
        return self.gitsyncs.get(key)

    def _serve(self, key: ObjectKey, body: Body, wanted: GitSync) -> None:
        try:
            reading = self.reads.read(key, wanted, self.gitsyncs.bodies())
            with self.lock:
                check_git_syncs(self.holdings.quota, set(self.served), key)
        except GitopsdError as error:  # its Secret may change: retried with backoff
            self._retire(key)
            self.status.failure(key, body, error)
            raise
        with self.lock:
            served = self.served.get(key)
        if served is None or served.running != reading.running(wanted.user):
            self._retire(key)
            if self.retirements.pending(key):
                return  # started once its predecessor's reconcile in flight ends
            served = self._start(key, wanted, reading)
        self.notifier.declare(wanted.key, reading.providers)
        if self.writers.sharded:  # its gate may have moved while it started
            served.worker.lead(self.writers.may_write(key.namespace))
        refused = partial(self._refused, key)
        token = reading.token
        served.webhook = Webhook(token, served.worker.announced, refused) if token else None
        if wanted.requested != served.worker.requested:
            served.worker.request(wanted.requested)
        self.status.report(key, body, served.worker.report, suspended=False)

    def webhook_of(self, path: str) -> Webhook | None:
        """The webhook at /hooks/`path`, `gitsyncs/NAMESPACE/NAME`, of a served GitSync."""
        key = webhook_key(path)
        with self.lock:
            served = self.served.get(key) if key else None
        return served.webhook if served else None

    def served_elsewhere(self, path: str) -> ObjectKey | None:
        """The GitSync at webhook path `gitsyncs/NAMESPACE/NAME`, if it exists in this
        replica's shard but another replica's share serves it (sharding)."""
        key = webhook_key(path)
        body = self._body(key) if key else None
        if key is None or body is None or self.writers.serves(key.namespace):
            return None
        return key if self._serves_label(body) else None

    def _start(self, key: ObjectKey, wanted: GitSync, reading: Reading) -> Served:
        source, repositories = reading.source, reading.repositories
        cluster = reading.target.paced(self.holdings.pace(key.namespace))
        worker = SourceWorker(
            config=source,
            cluster=cluster,
            recorder=self.recorder,
            cache_dir=repositories,
            leading=self.writers.gate_for(key.namespace),
            stopping=self.stopping,
            pool=self.pool,
            fetches=self.fetches,
            watches=self.watches,
            tenant=key.namespace,
            holdings=self.holdings,
            charts=self.charts,
            on_report=self.sources.reporting(source.name, partial(self._reported, key)),
            dependencies_waiting=self.sources.dependencies_of(source),
            requested=wanted.requested,  # its first poll answers a request made before
            tell=self.notifier.teller(source.name, self.writers.gate_for(key.namespace).is_set),
        )
        served = Served(wanted, source, repositories, worker)
        with self.lock:
            self.served[key] = served
        self.sources.add(worker)
        log.info("serving", extra={"source": wanted.key, "mode": source.mode})
        worker.schedule(self.clock.timers(f"gitsync:{key.namespace}/{key.name}"))
        return served

    def _retire(self, key: ObjectKey) -> SourceWorker | None:
        with self.lock:
            served = self.served.pop(key, None)
        if served is None:
            return None
        self.notifier.retire(served.source.name)
        self.sources.remove(served.worker)
        self.retirements.retire(key, served.worker)
        self.retries.now(key.namespace)  # its share of GitSyncs is free now
        self._drop_if_unused(served.repositories)
        return served.worker

    def _drop_if_unused(self, repositories: Path) -> None:
        """Removes a cache of repositories that no served GitSync reads any more (its
        credentials were rotated, or the last GitSync holding them went)."""
        with self.lock:
            used = any(served.repositories == repositories for served in self.served.values())
        if not used:
            shutil.rmtree(repositories, ignore_errors=True)
