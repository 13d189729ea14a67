"""Operator mode's generators: GitSyncSet objects, each kept equal to the GitSyncs its
generators and template make, by the controller pattern.

The sets are watched (an informer per served namespace, or one for all); a change of one
(not of its status), its interval, and a new commit of a repository its git generators read
each ask for a pass of it, run in the daemon's pool as a tenant's job (coalesced: a set's
passes never overlap). A pass reads the set, its git generators' directories (`set_reads`),
makes every element's GitSync (`gitsyncsets`, pure) and checks each one, as read and by a
server-side dry-run, before it writes any; then, behind the deletion guards, applies them
(server-side apply, each under the precondition that keeps it the set's) and deletes the
set's GitSyncs whose element went (by uid). A pass that fails writes nothing, says why in
the set's status, and is tried again after a backoff when a backoff can cure it. Only the
replica that writes for the set's namespace runs its passes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from gitopsd import gitsync
from gitopsd.cluster import ApiError, Cluster
from gitopsd.cluster.cache import content
from gitopsd.cluster.shards import SHARD_LABEL
from gitopsd.configfile import GitSyncSettings, TenantQuota
from gitopsd.daemon.clock import Clock, Timers
from gitopsd.daemon.gitsyncs import GitSyncs
from gitopsd.daemon.queue import Pool, Retries
from gitopsd.daemon.quotas import check_git_sync_sets
from gitopsd.daemon.set_reads import GitReads
from gitopsd.daemon.writers import Writers
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, GitopsdError, Remedy
from gitopsd.gitsync.spec import read as read_gitsync
from gitopsd.gitsyncsets import RESOURCE, generators, template
from gitopsd.gitsyncsets.deletion import Decision, decide
from gitopsd.gitsyncsets.spec import GitSyncSet, read
from gitopsd.gitsyncsets.status import Outcome, events, generated_message, status_of
from gitopsd.objects import Body, ObjectKey
from gitopsd.ownership import guarded

log = logging.getLogger("gitopsd.gitsyncset")


@dataclass
class Held:
    """A set this replica passes over: its pass (a pool job) and its interval's timer."""

    run: Callable[[], None]
    timers: Timers
    interval: float = 0.0


@dataclass
class GitSyncSetController:
    settings: GitSyncSettings
    cluster: Cluster
    writers: Writers
    stopping: threading.Event
    clock: Clock
    pool: Pool
    gitsyncs: GitSyncs
    """The GitSyncs of the served namespaces, as the GitSync controller sees them."""
    reads: GitReads
    quota: TenantQuota = field(default_factory=TenantQuota)
    """Each namespace's share: how many of its sets are passed over at once."""
    held: dict[ObjectKey, Held] = field(default_factory=dict)
    applied: dict[ObjectKey, dict[str, str]] = field(default_factory=dict)
    """Each set's GitSyncs' last apply, by name: the digest of what was sent and what it
    became, so a pass whose GitSync is already so sends nothing."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.retries = Retries(self.clock.timers("gitsyncset-retries"), again=self.request)
        self.sets = GitSyncs(
            self.cluster, self.settings.namespaces, self._changed, self.stopping, RESOURCE
        )

    def start(self) -> None:
        self.sets.start()

    def ready(self) -> bool:
        return self.sets.synced()

    def requeue_all(self) -> None:
        """A new leader (or a replica whose share changed) passes over every set afresh."""
        for key in self.sets.bodies():
            self.request(key)

    def request(self, key: ObjectKey) -> None:
        """Asks for a pass of the set (it runs once more if one is running)."""
        with self.lock:
            held = self.held.get(key)
            if held is None:
                run = self.pool.coalesced(partial(self._pass, key), str(key), key.namespace)
                held = self.held[key] = Held(run, self.clock.timers(f"gitsyncset:{key}"))
        held.run()

    def _changed(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        if body is None:  # its namespace's share is free: a set waiting for it may go
            for other in self.sets.bodies():
                if other.namespace == key.namespace:
                    self.request(other)
        if body is None or content(previous) != content(body):
            self.request(key)

    def _pass(self, key: ObjectKey) -> None:
        body = self.sets.get(key)
        if body is None or not self._serves(key, body):
            self._release(key)
            return
        cluster = self.writers.cluster_for(key.namespace)
        if not cluster.writable() or self.stopping.is_set():
            return  # a standby: the replica that writes passes over it
        try:
            check_git_sync_sets(self.quota, self.sets.bodies(), key)
            gitsyncset = read(body)
            self._every(key, gitsyncset.interval_seconds)
            outcome = self._generate(key, gitsyncset, cluster)
        except GitopsdError as error:
            outcome = Outcome.failed(error, self._owned_names(key, body))
            self._failed(key, error)
        except Exception as error:  # a bug must not end the set's passes
            log.exception("GitSyncSet %s failed unexpectedly", key)
            outcome = Outcome("Failed", f"unexpected: {error}", self._owned_names(key, body))
            self.retries.failed(key)
        else:
            self.retries.succeeded(key)
        self._publish(cluster, body, outcome)

    def _serves(self, key: ObjectKey, body: Body) -> bool:
        """Whether this replica passes over the set: one of its share and shard (as for a
        GitSync), not being deleted (its GitSyncs go with it: none is made again)."""
        metadata = body["metadata"]
        shard = (metadata.get("labels") or {}).get(SHARD_LABEL)
        deleting = bool(metadata.get("deletionTimestamp"))
        return shard == self.settings.shard and self.writers.serves(key.namespace) and not deleting

    def _failed(self, key: ObjectKey, error: GitopsdError) -> None:
        extra = {"source": f"{key.namespace}/{key.name}", "stage": str(error.stage)}
        if error.remedy == Remedy.BACK_OFF:
            delay = self.retries.failed(key)
            log.error("%s; retrying in %.1f s", error, delay, extra=extra)
        else:  # a new spec or revision cures it: its watch event, or the interval
            log.error("%s", error, extra=extra)

    def _generate(self, key: ObjectKey, gitsyncset: GitSyncSet, cluster: Cluster) -> Outcome:
        """One pass: every element's GitSync made and checked, then written, or nothing."""
        listings = self.reads.listings(key, gitsyncset, partial(self.request, key))
        elements = generators.elements(gitsyncset, listings, self.settings.clusters)
        wanted = template.generated(gitsyncset, elements)
        for body in wanted.values():
            self._check(gitsyncset, body)
        existing = self._existing(key.namespace)
        decision = decide(gitsyncset.uid, wanted, existing, gitsyncset.guards)
        if decision.refused is not None:
            owned = _owned_by(gitsyncset.uid, existing)
            return Outcome("DeletionBlocked", decision.refusal_message, owned)
        changed = [n for n in decision.apply if self._changes(key, wanted[n], existing.get(n))]
        for name in changed:  # every one checked by the API server before any is written
            self._apply(cluster, gitsyncset, wanted[name], existing.get(name), dry_run=True)
        for name in changed:
            self._apply(cluster, gitsyncset, wanted[name], existing.get(name), dry_run=False)
        for name in decision.delete:
            self._delete(cluster, existing[name])
        created = tuple(n for n in changed if n not in existing)
        return _outcome(decision, created)

    def _check(self, gitsyncset: GitSyncSet, body: Body) -> None:
        """The GitSync as the GitSync controller will read it: every field it can check."""
        try:
            read_gitsync(body, self.settings)
        except ConfigError as error:
            raise ConfigError(
                f"GitSyncSet {gitsyncset.key}: its GitSync is invalid: {error}; nothing was "
                "applied or deleted"
            ) from None

    def _existing(self, namespace: str) -> dict[str, Body]:
        bodies = self.gitsyncs.bodies()
        return {key.name: body for key, body in bodies.items() if key.namespace == namespace}

    def _changes(self, key: ObjectKey, wanted: Body, live: Body | None) -> bool:
        """Whether the GitSync is not what this replica applied last (or was changed since)."""
        if live is None:
            return True
        with self.lock:
            applied = self.applied.get(key, {}).get(wanted["metadata"]["name"])
        return applied != _applied_digest(wanted, live)

    def _apply(
        self,
        cluster: Cluster,
        gitsyncset: GitSyncSet,
        wanted: Body,
        live: Body | None,
        dry_run: bool,
    ) -> None:
        name = wanted["metadata"]["name"]
        try:
            body = guarded(wanted, live)
            stored = cluster.apply(gitsync.RESOURCE, body, dry_run=dry_run, force=True)
        except ApiError as error:
            raise _refused(gitsyncset, name, error, dry_run) from None
        if not dry_run:
            key = ObjectKey(RESOURCE.group, RESOURCE.kind, gitsyncset.namespace, gitsyncset.name)
            with self.lock:
                self.applied.setdefault(key, {})[name] = _applied_digest(wanted, stored)

    def _delete(self, cluster: Cluster, live: Body) -> None:
        metadata = live["metadata"]
        cluster.delete(gitsync.RESOURCE, metadata["namespace"], metadata["name"], metadata["uid"])

    def _publish(self, cluster: Cluster, body: Body, outcome: Outcome) -> None:
        metadata = body["metadata"]
        previous = body.get("status") or None
        status = status_of(int(metadata.get("generation") or 0), outcome, previous)
        if _same(status, previous):
            return
        cluster.apply_status(RESOURCE, metadata["namespace"], metadata["name"], status)
        for event in events(previous, status, outcome):
            cluster.event(body, event.reason, event.message, event.type)

    def _owned_names(self, key: ObjectKey, body: Body) -> tuple[str, ...]:
        return _owned_by(body["metadata"].get("uid", ""), self._existing(key.namespace))

    def _every(self, key: ObjectKey, interval: float) -> None:
        with self.lock:
            held = self.held[key]
            if held.interval == interval:
                return
            held.interval = interval
        held.timers.every("pass", partial(self.request, key), interval, jitter=interval * 0.1)

    def _release(self, key: ObjectKey) -> None:
        """The set is gone, or another replica's: its timer and fetches go (its GitSyncs go
        with it by their owner reference: the garbage collector deletes them)."""
        with self.lock:
            held = self.held.pop(key, None)
            self.applied.pop(key, None)
        if held is not None:
            held.timers.remove()
        self.reads.forget(key)

    def stop(self) -> None:
        with self.lock:
            held = list(self.held.values())
        for one in held:
            one.timers.remove()


def _applied_digest(wanted: Body, live: Body) -> str:
    metadata = live.get("metadata") or {}
    seen = [
        wanted,
        metadata.get("uid"),
        metadata.get("generation"),
        metadata.get("labels"),
        metadata.get("annotations"),
        metadata.get("ownerReferences"),
    ]
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()


def _refused(gitsyncset: GitSyncSet, name: str, error: ApiError, dry_run: bool) -> GitopsdError:
    """What the API server's refusal of a GitSync means; a dry-run's comes before any write."""
    where = f"GitSyncSet {gitsyncset.key}: GitSync {name}"
    unwritten = "; nothing was applied or deleted" if dry_run else ""
    if error.status == 409:
        return ClusterError(
            f"{where}: {error} (created or changed meanwhile: the next pass reads it again)",
            ClusterReason.CONFLICT,
        )
    if error.status in (400, 422):
        return ConfigError(f"{where}: the API server refuses it: {error}{unwritten}")
    return ClusterError(f"{where}: {error}", error.reason)


def _owned_by(uid: str, existing: dict[str, Body]) -> tuple[str, ...]:
    return tuple(sorted(name for name, body in existing.items() if template.owned_by(body, uid)))


def _outcome(decision: Decision, created: tuple[str, ...]) -> Outcome:
    held = tuple(sorted(decision.apply))
    if decision.taken:
        taken = ", ".join(decision.taken)
        message = (
            f"GitSyncs {taken} exist and are not this set's: never taken over (rename "
            f"them, or the template's name); {generated_message(len(held))}"
        )
        return Outcome("NameTaken", message, held, created, decision.delete)
    return Outcome("Generated", generated_message(len(held)), held, created, decision.delete)


def _same(status: Body, previous: Body | None) -> bool:
    """Whether the status is the one the set holds (a condition keeps its transition time
    while its status holds, so an unchanged pass writes nothing)."""
    return previous is not None and json.dumps(status, sort_keys=True) == json.dumps(
        previous, sort_keys=True
    )
