"""One source, kept in sync: polled from git, and watched in the cluster.

`poll()` runs on the source's interval, at start and on a webhook: fetch, render (only a
new revision), read live state from the watch cache, measure drift, and act by mode.
Watch events put keys on a queue and ask for a drift check (`_check`, daemon/checks.py),
which re-checks within about a second and, in enforce mode with selfHeal, corrects the
drift at once. Both run on the daemon's pool of threads, a check before any poll that waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitopsd.backoff import Backoff
from gitopsd.cluster import Cluster
from gitopsd.cluster.watches import LiveCache, Watches
from gitopsd.configfile import Mode, SourceConfig
from gitopsd.daemon.checks import DriftChecks
from gitopsd.daemon.clock import Timers
from gitopsd.daemon.deadlines import Deadline
from gitopsd.daemon.news import News
from gitopsd.daemon.queue import Pool, WorkQueue
from gitopsd.daemon.quotas import Holdings
from gitopsd.daemon.reporter import Reporter
from gitopsd.errors import ApplyError, GitopsdError, Remedy
from gitopsd.metrics import Recorder
from gitopsd.notifications import Notice
from gitopsd.objects import ObjectKey
from gitopsd.reconcile import (
    Bounds,
    CacheReader,
    Intent,
    KnownInvalid,
    Pass,
    Source,
    State,
    desired,
    read_only,
    reconcile_once,
)
from gitopsd.reconcile.measure import DriftMemo
from gitopsd.reconcile.stamping import keep_stamps
from gitopsd.source import ChartCache, FetchLedger, SharedFetch

ANNOUNCE_SECONDS = 1.0
"""At most one fetch a second for announced pushes (webhooks, requests to reconcile now)."""


@dataclass
class SourceWorker(DriftChecks):
    config: SourceConfig
    cluster: Cluster
    recorder: Recorder
    cache_dir: Path
    leading: threading.Event
    stopping: threading.Event
    pool: Pool
    """The daemon's threads that run polls: this source's wait their turn there."""
    watches: Watches
    """The daemon's informers, shared by its sources."""
    busy: threading.Lock = field(default_factory=threading.Lock)
    backoff: Backoff = field(default_factory=Backoff)
    recheck_backoff: Backoff = field(default_factory=Backoff)
    """Paces drift checks after a failed one; its own, so a git outage never pauses healing."""
    attempted: threading.Event = field(default_factory=threading.Event)
    on_report: Callable[[], None] = lambda: None
    """Hears that `report` changed: after each poll and drift check."""
    dependencies_waiting: Callable[[], str] = lambda: ""
    """Why a new revision must wait (the sources it depends on are not ready), or ""."""
    halt: threading.Event = field(default_factory=threading.Event)
    """Set once it stops for good (its GitSync gone or changed, shutdown): watches end."""
    timers: Timers | None = None
    """Its polls and what it runs later on the daemon's clock, once scheduled."""
    requested: str = ""
    """The latest request to reconcile now; the report's handled_request once handled."""
    fetches: FetchLedger | None = None
    """The daemon's record of fetches, shared by its sources of one repository and ref."""
    tenant: str = ""
    """Whose source it is, for fairness and shares: a GitSync's namespace ("" for a file's)."""
    announced_at: float = float("-inf")
    """When a push announced last had the source fetch (monotonic seconds)."""
    checked_at: float = float("-inf")
    """When the last drift check took its keys (monotonic seconds)."""
    reassessed_at: float = float("-inf")  # when health alone was last assessed
    check_due_at: float = 0.0  # when the check held for later is due (see DriftChecks)
    holdings: Holdings | None = None
    """What its tenant's sources hold, against the tenant's share (None: not counted)."""
    charts: ChartCache | None = None
    """The daemon's record of the charts its sources hold on disk, and its bounds."""
    tell: Callable[[Notice], None] | None = None
    """Where its notices go (the daemon's notifier), if anywhere."""

    def __post_init__(self) -> None:
        fence, config, halt = self.cluster.may_write, self.config, self.halt
        deadline = self.deadline = Deadline(config.timeout_seconds)
        # a retired source writes nothing more: its GitSync may be withdrawing its objects
        self.cluster = replace(
            self.cluster, may_write=lambda: fence() and not (deadline.passed() or halt.is_set())
        )
        applyset = desired.applyset_of(config.settings)
        self.cache = LiveCache(self.watches, self.cluster, applyset.id, self._changed, self.halt)
        self.cache.on_health = self._health_moved
        bounds = Bounds.of(config.settings, config.spec.limits)
        self.reader = CacheReader(self.cluster, self.cache, bounds)
        self.queue = WorkQueue()
        self.healths = WorkQueue()  # objects whose health alone moved: assessed, not measured
        self.poll_soon = self.pool.coalesced(self.poll, f"poll of {config.name}", self.tenant)
        """Polls on a pool thread (interval, start-up, new leader, webhook): a burst of calls
        costs at most one poll after the one in flight."""
        self.shared = self._join(self.fetches)
        self.held = self.charts.user(self.tenant) if self.charts else None
        self.source = Source(
            config.spec,
            config.settings,
            self.cache_dir,
            config.self_heal,
            shared=self.shared,
            charts=self.held,
            stamps_wait=True,  # the memo lives on: stamps ride the next parent write, or stop
        )
        self.state = State(memo=DriftMemo(self.cache.memo_version))
        self.reporter = Reporter(config, self.recorder, self.cluster, self.state)
        self.reporter.news = News(config.name, self._tell) if self.tell else None
        check = f"drift check of {config.name}"
        self.check_soon = self.pool.coalesced(self._check, check, self.tenant, urgent=True)
        """Measures (and heals) the keys queued by watch events, before any poll that waits."""

    @property
    def name(self) -> str:
        return self.config.name

    def _tell(self, notice: Notice) -> None:
        """Only the replica that writes for the source tells of it: a standby's reads are
        the leader's news too."""
        if self.tell is not None and self.leading.is_set():
            self.tell(notice)

    def _join(self, fetches: FetchLedger | None) -> SharedFetch | None:
        """Its fetches, shared with the sources of its ref: one within half its interval is
        used (alone, it still asks the remote once an interval)."""
        if fetches is None or not desired.is_git(self.config.spec):
            return None
        fresh, spec = self.config.interval_seconds / 2, self.config.spec
        return fetches.join(spec, self.cache_dir, fresh, self.poll_soon, self.tenant)

    def ready(self) -> bool:
        return self.attempted.is_set() and self.cache.synced()

    def schedule(self, timers: Timers) -> None:
        """Polls every interval of the source (with 10% jitter), and soon."""
        interval = self.config.interval_seconds
        timers.every("poll", self.poll_soon, interval, jitter=max(interval * 0.1, 0.1))
        self.timers = timers
        self.poll_soon()

    def stop(self, grace_seconds: float) -> None:
        """At shutdown: no new work starts (the daemon's stop is set, and fences every write
        but a record); the reconcile in flight gets up to `grace_seconds` to end, recording
        what it applied, then, with grace left, the stamps its syncs left waiting."""
        state = self.state  # a record still elsewhere (`earlier`) is moved by a sync, not here
        writes = self.config.mode == Mode.ENFORCE and self.leading.is_set() and not state.earlier
        if self.ended(grace_seconds) and grace_seconds > 0 and writes and state.desired:
            keep_stamps(self.cluster, self.config.settings, self.reader, state.memo)
        self.retire()

    def retire(self) -> None:
        """Stops its watches, polls and drift checks, fences its writes and removes its jobs
        at once: a reconcile in flight writes and retries nothing more (it sees the halt)."""
        self.halt.set()
        self.cache.stop()
        if self.shared:
            self.shared.leave()
        if self.holdings:
            self.holdings.release(self.tenant, id(self))
        if self.timers:
            self.timers.remove()
        if self.held:
            self.held.leave()  # what only it held goes

    def ended(self, timeout_seconds: float) -> bool:
        """Whether its reconcile or drift check in flight, if any, ends within the timeout."""
        if ended := self.busy.acquire(timeout=timeout_seconds):
            self.busy.release()
        return ended

    def lead(self, writing: bool) -> None:
        """Its gate (sharding) opened or closed: once open, it applies afresh, as a leader."""
        if writing and not self.leading.is_set():
            self.leading.set()
            self.forget_applied()
            self.poll_soon()
        elif not writing:
            self.leading.clear()

    def forget_applied(self) -> None:
        """A new leader applies again at its next poll, and dates no drift by its standby's."""
        self.state.applied_revision = None
        self.reporter.seen.clear()

    def request(self, token: str) -> None:
        """Reconcile now, whatever interval and backoff say (`gitopsd reconcile`, a GitSync's
        reconcile-requested-at); the report names `token` once done."""
        self.requested = token
        self.announced()

    def announced(self) -> None:
        """Polls now, fetching afresh, not using another source's fetch (a webhook announced a
        push, or someone asked); announcements within a second of the last are one, later."""
        wait = self.announced_at + ANNOUNCE_SECONDS - time.monotonic()
        if wait > 0 and self.timers and not self.halt.is_set():
            self.timers.later("announce", self._fetch_now, wait)
        else:
            self._fetch_now()

    def _fetch_now(self) -> None:
        self.announced_at = time.monotonic()
        if self.shared:
            self.shared.forget()
        self.poll_soon()

    def poll(self) -> None:
        """One reconcile of the whole source (scheduler, start-up and webhook call this)."""
        if not self.backoff.ready() and self.requested == self.report.handled_request:
            return
        with self.busy, self.deadline.running():
            if self.stopping.is_set() or self.halt.is_set():  # under the lock: no new work
                return
            token = self.requested  # read under the lock: a later poll answers a later one
            with self.reporter.recording():  # in the history before the request is answered
                started = time.monotonic()
                result = self._reconcile()
                self.recorder.reconciled(self.name, result, time.monotonic() - started, time.time())
                self._settle()
            self.report.handled_request = token
            self.attempted.set()
        self.on_report()
        if len(self.queue) or len(self.healths):  # seen while it ran, or before it first ended
            self.check_soon()

    def _retry(self) -> None:  # a failed poll's backoff ended: poll now, whatever the clocks say
        self.backoff.not_before = 0.0
        self.poll_soon()

    def _reconcile(self) -> str:
        try:
            leading = self._once()
        except KnownInvalid:
            return "skipped"  # a bad revision stays bad: wait for the next one
        except GitopsdError as error:
            delay = self._failed(error, self.backoff)
            if delay is not None and self.timers and not self.halt.is_set():
                self.timers.later("retry", self._retry, delay)
            return "failed"
        finally:
            self.report.finished += 1
        self.backoff.reset()
        self.reporter.succeeded()
        if not leading:
            return "standby"  # it only read: no success of a sync to count, nor a time
        return "waiting" if self.report.waiting else "success"

    def _once(self, changed: set[ObjectKey] | None = None) -> bool:
        """One reconcile (`changed` None) or drift check after watch events on `changed`;
        a standby only reads, to keep its caches warm. Says whether it was the leader's."""
        listener = replace(self.reporter.listener(changed or set()), on_read=self._hold)
        enforce = self.config.mode == Mode.ENFORCE
        kind = Pass.of(enforce, poll=changed is None)
        intent = Intent(kind, lambda: not self.stopping.is_set(), self.dependencies_waiting)
        if not self.leading.is_set():
            read_only(self.source, self.cluster, self.reader, self.state, listener, intent.polls)
            return False
        try:
            result = reconcile_once(
                self.source, self.cluster, self.reader, self.state, intent, listener
            )
        except ApplyError as error:
            if enforce:
                self.recorder.apply_failed(
                    self.name, error.action, error.reason, len(error.failures)
                )
            raise
        if intent.polls:  # the only reconcile that may apply a new revision
            self.reporter.waiting(result.waiting)
        self.reporter.assessed(result)
        if result.report is not None:
            self.reporter.synced(result, result.report)
        return True

    def _failed(self, error: GitopsdError, backoff: Backoff) -> float | None:
        """Reports a failure; what may cure itself is retried after `backoff` (its delay is
        returned), a bad revision waits for the next one, and nothing is retried once the
        source is stopping (None)."""
        error = self.deadline.explained(error)
        delay = None
        if self.halt.is_set() or self.stopping.is_set():
            retry = "not retried: the source is stopping"
        elif error.remedy == Remedy.NEW_REVISION:
            retry = "waiting for a new revision"
        else:
            delay = backoff.failed()
            retry = f"retrying in {delay:.1f} s"
        self.reporter.failed(error, retry)
        return delay

    def _hold(self, objects: int) -> None:
        """A new revision's objects, counted in its tenant's share before they are kept."""
        if self.holdings is not None and not self.halt.is_set():
            self.holdings.hold(self.tenant, id(self), self.name, objects)
