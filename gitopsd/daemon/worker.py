"""One source, kept in sync: polled from git, and watched in the cluster.

`poll()` runs on the source's interval, at start and on a webhook: fetch, render (only a
new revision), read live state from the watch cache, measure drift, and act by mode.
Watch events put keys on a queue; `_drain` re-checks within about a second and, in
enforce mode with selfHeal, corrects the drift at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from gitopsd import diff, inventory, loop
from gitopsd.apply import Action, ChangeSet, Outcome, Target
from gitopsd.cluster import Cluster
from gitopsd.cluster.cache import LiveCache
from gitopsd.configfile import Mode, SourceConfig
from gitopsd.daemon.logs import ContextLog
from gitopsd.daemon.queue import Coalesced, WorkQueue
from gitopsd.errors import (
    ApplyError,
    ClusterError,
    ConfigError,
    GitopsdError,
    ManifestError,
    SourceError,
)
from gitopsd.manifests import ParseCache
from gitopsd.metrics import Recorder
from gitopsd.objects import Body, ObjectKey

log = logging.getLogger("gitopsd.source")
CACHE_SYNC_SECONDS = 30.0
RETRIED_MANIFEST_REASONS = frozenset({"unknown_kind"})
"""Manifest errors the cluster can cure (a CRD installed later): retried with backoff, where
other manifest errors wait for a new revision."""


@dataclass
class Backoff:
    """Exponential backoff with jitter for transient failures of one source."""

    base_seconds: float = 1.0
    max_seconds: float = 300.0
    failures: int = 0
    not_before: float = 0.0

    def ready(self) -> bool:
        return time.monotonic() >= self.not_before

    def failed(self) -> float:
        delay: float = min(self.base_seconds * 2**self.failures, self.max_seconds)
        delay *= random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not crypto
        self.failures += 1
        self.not_before = time.monotonic() + delay
        return delay

    def reset(self) -> None:
        self.failures, self.not_before = 0, 0.0


@dataclass
class SourceWorker:
    config: SourceConfig
    cluster: Cluster
    recorder: Recorder
    cache_dir: Path
    leading: threading.Event
    stopping: threading.Event
    busy: threading.Lock = field(default_factory=threading.Lock)
    backoff: Backoff = field(default_factory=Backoff)
    recheck_backoff: Backoff = field(default_factory=Backoff)
    """Paces drift checks after a failed one; its own, so a git outage never pauses healing."""
    parse_cache: ParseCache = field(default_factory=ParseCache)
    desired: loop.Desired | None = None
    applied_revision: str | None = None
    """The revision last applied in full; None makes the next poll apply (a new leader)."""
    failed_revision: str | None = None
    parent: Body | None = None
    recorded: inventory.Record = field(default_factory=dict)
    """The parent's record, decoded when the parent is read."""
    deadline: float | None = None
    """When the reconcile or drift check in flight must stop writing (monotonic seconds)."""
    warned: set[ObjectKey] = field(default_factory=set)
    attempted: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        fence = self.cluster.may_write
        self.cluster = replace(self.cluster, may_write=lambda: fence() and not self._late())
        applyset = loop.applyset_of(self.config.settings)
        self.cache = LiveCache(self.cluster, applyset.id, self._changed, self.stopping)
        self.memo = loop.DriftMemo(self.cache.content_version)
        self.queue = WorkQueue()
        self.poll_soon = Coalesced(self.poll, f"poll-{self.config.name}").request
        """Polls in the background (start-up, a new leader, a webhook): a burst of calls
        costs at most one poll after the one in flight, and one thread."""
        self.log = ContextLog(log, {"source": self.config.name})
        threading.Thread(target=self._drain, name=f"drift-{self.config.name}", daemon=True).start()

    @property
    def name(self) -> str:
        return self.config.name

    def ready(self) -> bool:
        return self.attempted.is_set() and self.cache.synced()

    def poll(self) -> None:
        """One reconcile of the whole source (scheduler, start-up and webhook call this)."""
        if not self.backoff.ready():
            return
        with self.busy, self._deadline():
            if self.stopping.is_set():  # checked under the lock: no new work after SIGTERM
                return
            started = time.monotonic()
            result = self._reconcile()
            self.recorder.reconciled(self.name, result, time.monotonic() - started, time.time())
            self.attempted.set()

    def _reconcile(self) -> str:
        try:
            desired = self._desired()
            if desired is None:
                return "skipped"
            live = self._live(desired)
            if self.leading.is_set():
                self._act(desired, live)
            self.backoff.reset()
            return "success"
        except GitopsdError as error:
            self._failed(error, self.backoff)
        return "failed"

    @contextmanager
    def _deadline(self) -> Iterator[None]:
        """Past the source's timeout the fence says no, so a reconcile or drift check that
        crawls writes nothing more, fails and backs off, instead of holding the source."""
        self.deadline = time.monotonic() + self.config.timeout_seconds
        try:
            yield
        finally:
            self.deadline = None

    def _late(self) -> bool:
        deadline = self.deadline
        return deadline is not None and time.monotonic() > deadline

    def _failed(self, error: GitopsdError, backoff: Backoff) -> None:
        """Counts and logs a failure; what may cure itself is retried after `backoff`, a bad
        revision waits for the next one."""
        if self._late():
            limit = self.config.timeout_seconds
            cause = str(error).splitlines()[0][:300]
            error = ClusterError(
                f"did not finish within its timeout of {limit:g} s: {cause}", "timeout"
            )
        reason = str(getattr(error, "reason", "invalid"))
        if isinstance(error, ManifestError) and reason not in RETRIED_MANIFEST_REASONS:
            retry = "waiting for a new revision"
        else:
            retry = f"retrying in {backoff.failed():.1f} s"
        stage = _stage_of(error)
        self.recorder.error(self.name, stage, reason)
        self.log.error("%s; %s", error, retry, extra={"stage": stage, "reason": reason})

    # getDesired: only a new revision is read and rendered again.

    def _desired(self) -> loop.Desired | None:
        started = time.monotonic()
        try:
            revision = loop.fetch(self.config.spec, self.cache_dir)
        finally:
            self.recorder.fetched(self.name, time.monotonic() - started)
        if self.desired and revision.sha and revision.sha == self.desired.revision.sha:
            return self.desired
        if revision.sha and revision.sha == self.failed_revision:
            return None  # a bad revision stays bad: wait for the next one
        try:
            found = loop.read_revision(revision, self.config.spec, self.cache_dir, self.parse_cache)
            targets = loop.resolve(found, self.cluster, self.config.settings)
        except ManifestError as error:
            if error.reason not in RETRIED_MANIFEST_REASONS:
                self.failed_revision = revision.sha
            raise
        self.desired = loop.Desired(revision, targets)
        self.recorder.revision(self.name, revision.sha)
        self.log.info("read revision", extra={"revision": revision.sha, "mode": self.config.mode})
        return self.desired

    # getCurrent: from the watch cache, which holds the owned and the desired objects.

    def _live(self, desired: loop.Desired) -> loop.Live:
        applyset = loop.applyset_of(self.config.settings)
        if self.parent is None:  # read again after each sync, which rewrites it
            self.parent = self.cluster.get(loop.CONFIG_MAPS, applyset.namespace, applyset.name)
            self.recorded = loop.record_of(self.parent)
        group_kinds, namespaces = loop.scope(applyset, self.parent, self.recorded, desired.targets)
        resources = [r for gk in sorted(group_kinds) if (r := self.cluster.discovery.preferred(gk))]
        self.cache.ensure(resources, namespaces, desired.targets)
        if not self.cache.wait_synced(CACHE_SYNC_SECONDS):
            raise ClusterError("the watch cache did not sync in time", "timeout")
        objects = self.cache.objects()
        return loop.live_from(applyset, self.parent, self.recorded, objects, desired.targets)

    # makeChanges, by mode: a new revision is applied whole; drift is healed object by object.

    def _act(self, desired: loop.Desired, live: loop.Live) -> None:
        drifts = self._measure(desired, live)
        if self.config.mode == Mode.ENFORCE and desired.revision.sha != self.applied_revision:
            self._sync(desired, live, desired.targets, drifts, prune=True)
            self.applied_revision = desired.revision.sha
            self.recorder.applied(self.name, desired.revision.commit_time, time.time())
        else:
            self._heal(desired, live, drifts)

    def _measure(
        self, desired: loop.Desired, live: loop.Live, changed: set[ObjectKey] | None = None
    ) -> list[diff.Drift]:
        """Drift, exported as metrics (and Events in warn mode). The memo limits dry-runs to
        objects whose git body or live content changed."""
        drifts = loop.drift(self.cluster, self.config.settings, desired.targets, live, self.memo)
        self.recorder.drift(self.name, drifts)
        if changed:
            self._observe_latency(drifts, changed, live)
        if self.config.mode == Mode.WARN:
            self._warn(drifts, live)
        return drifts

    def _heal(self, desired: loop.Desired, live: loop.Live, drifts: list[diff.Drift]) -> None:
        """In enforce mode with selfHeal, applies the objects that drifted from the revision
        applied last (never a prune: that is for new revisions)."""
        applied = desired.revision.sha == self.applied_revision
        if not (self.config.mode == Mode.ENFORCE and self.config.self_heal and applied):
            return
        keys = {d.key for d in drifts if d.state != diff.State.EXTRANEOUS}
        if keys:
            targets = {key: desired.targets[key] for key in keys}
            self._sync(desired, live, targets, drifts, prune=False)

    def _sync(
        self,
        desired: loop.Desired,
        live: loop.Live,
        targets: dict[ObjectKey, Target],
        drifts: list[diff.Drift],
        prune: bool,
    ) -> None:
        """Applies `targets` (and prunes, if asked); `drifts` is what was measured before."""
        settings = self.config.settings
        if not prune:
            settings = replace(settings, prune=replace(settings.prune, enabled=False))
        revision = {"revision": desired.revision.sha}
        self.log.info("sync started", extra={**revision, "objects": len(targets)})
        try:
            report = loop.sync(
                self.cluster,
                settings,
                targets,
                desired.revision.sha,
                live,
                on_outcome=self._log_outcome,
                may_prune=lambda: not self.stopping.is_set(),
            )
        except ApplyError as error:
            self.recorder.apply_failed(self.name, error.action, error.reason, len(error.failures))
            raise
        finally:
            self.parent = None  # the sync (re)wrote it; read it again next time
        self._forget_drift_undone(drifts, report.changes)
        self.recorder.changes(self.name, report.changes)
        self.recorder.refused(self.name, [str(reason) for _, reason in report.refused])
        for outcome in report.changes.outcomes:
            if outcome.action == Action.PRUNED:
                self._log_outcome(outcome)
        for key, reason in report.refused:
            self.log.warning("prune refused (%s)", reason, extra={**revision, "object": str(key)})
        for takeover in report.changes.takeovers:
            self.log.info("took over %s", takeover, extra=revision)
        changed = [o for o in report.changes.outcomes if o.action != Action.UNCHANGED]
        self.log.info("sync finished: %d changed", len(changed), extra=revision)

    def _forget_drift_undone(self, drifts: list[diff.Drift], changes: ChangeSet) -> None:
        """Objects the sync created or pruned leave the drift gauges now: until the watch
        measures them again (after the poll), a scrape would count existing objects as
        missing. Their ADDED and DELETED events measure them again. A configured object
        stays until then: its write may not have undone its drift."""
        undone = {o.key for o in changes.outcomes if o.action in (Action.CREATED, Action.PRUNED)}
        if undone:
            self.recorder.drift(self.name, [d for d in drifts if d.key not in undone])

    def _log_outcome(self, outcome: Outcome) -> None:
        if outcome.action != Action.UNCHANGED:
            detail = f" ({outcome.detail})" if outcome.detail else ""
            self.log.info("%s%s", outcome.action, detail, extra={"object": str(outcome.key)})

    def _warn(self, drifts: list[diff.Drift], live: loop.Live) -> None:
        """An Event on each object that newly drifted (names fields and managers, no values)."""
        current = {d.key for d in drifts}
        for drift in drifts:
            body = live.find(drift.key)
            if drift.key in self.warned or body is None:
                continue
            fields = ", ".join(f"{c.path} (by {c.manager})" for c in drift.changes) or drift.state
            self.cluster.event(body, "Drift", f"differs from git: {fields}")
        self.warned = current

    # Watch events: re-check soon after a live change, heal it in enforce mode.

    def _changed(self, key: ObjectKey, body: Body | None) -> None:
        self.queue.add(key)

    def _drain(self) -> None:
        while not self.stopping.is_set():
            keys = self.queue.take(timeout_seconds=0.5)
            if not keys or not self.leading.is_set():
                continue  # a new leader measures everything in its first poll
            waiting = not self.recheck_backoff.ready()
            if self.desired is None or not self.attempted.is_set() or waiting:
                # The first poll may have measured before this change, or a failed check
                # waits out its backoff: keep the keys for later.
                self.queue.add_all(keys)
                continue
            with self.busy, self._deadline():
                self._recheck(keys)

    def _recheck(self, keys: set[ObjectKey]) -> None:
        """Measures (and heals) after watch events. The snapshot is taken after `keys` were,
        so it holds each key's event or a newer one; a failed check queues them again."""
        desired = self.desired
        if desired is None or self.stopping.is_set():
            return
        try:
            live = self._live(desired)
            self._heal(desired, live, self._measure(desired, live, keys))
            self.recheck_backoff.reset()
        except GitopsdError as error:
            self._failed(error, self.recheck_backoff)
            self.queue.add_all(keys)

    def _observe_latency(
        self, drifts: list[diff.Drift], keys: set[ObjectKey], live: loop.Live
    ) -> None:
        for drift in drifts:
            body = live.find(drift.key)
            if drift.key in keys and body is not None:
                changed_at = _last_change(body)
                if changed_at is not None:
                    self.recorder.detected(self.name, time.time() - changed_at)


def _stage_of(error: GitopsdError) -> str:
    """The closed `stage` label of gitopsd_errors_total."""
    if isinstance(error, SourceError):
        return "source"
    if isinstance(error, ManifestError):
        return "manifests"
    if isinstance(error, ConfigError):
        return "config"
    return "cluster"


def _last_change(body: Body) -> float | None:
    """When the object was last written, from its managedFields (second resolution)."""
    times = [e.get("time") for e in (body.get("metadata") or {}).get("managedFields") or []]
    stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times if t]
    return max(stamps, default=None)
