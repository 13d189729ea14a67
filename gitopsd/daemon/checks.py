"""A source's drift checks after watch events: the half of `SourceWorker` that the watch
drives. An event that moves what gitopsd owns queues its key for a check (`_check`), which
measures (and, with selfHeal, heals) within about a second; one that moves only health is
assessed again, at most once a HEALTH_WINDOW_SECONDS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial

from gitopsd.backoff import Backoff
from gitopsd.cluster.watches import LiveCache
from gitopsd.configfile import SourceConfig
from gitopsd.daemon.clock import Timers
from gitopsd.daemon.deadlines import Deadline
from gitopsd.daemon.queue import WorkQueue
from gitopsd.daemon.reporter import APPLIED, Reporter
from gitopsd.errors import GitopsdError
from gitopsd.gitsync.status import SourceReport
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import State

CHECK_WINDOW_SECONDS = 0.1
"""At most one drift check per this: a storm of watch events coalesces into a few checks."""
HEALTH_WINDOW_SECONDS = 1.0
"""At most one assessment of health alone (one status written) per this: a rollout in steps."""
SETTLE_SECONDS = 2.0
"""How long a poll that wrote waits for its writes' events, so that it reports their health."""


class DriftChecks:
    """What a source does on watch events; `SourceWorker` holds the state named here."""

    config: SourceConfig
    cache: LiveCache
    state: State
    reporter: Reporter
    queue: WorkQueue
    """Keys whose owned fields moved: measured by the next check."""
    healths: WorkQueue
    """Keys whose health alone moved: assessed, not measured."""
    busy: threading.Lock
    stopping: threading.Event
    halt: threading.Event
    leading: threading.Event
    attempted: threading.Event
    recheck_backoff: Backoff
    deadline: Deadline
    timers: Timers | None
    checked_at: float
    reassessed_at: float
    check_due_at: float
    """When the check the clock holds for later is due (monotonic seconds; 0: none is).
    Until then an event only queues its key: a rollout's thousand events a second would
    otherwise each run a job that only schedules that check again."""
    check_soon: Callable[[], None]
    on_report: Callable[[], None]
    _once: Callable[[set[ObjectKey]], bool]
    """A reconcile after watch events on those keys (the worker's)."""
    _failed: Callable[[GitopsdError, Backoff], float | None]
    """Reports a failure; the delay before a retry, if any (the worker's)."""

    @property
    def report(self) -> SourceReport:
        """What it saw last (a GitSync's status is made of it)."""
        return self.reporter.report

    def _settle(self) -> None:
        """Checks what a poll wrote once the watch brings it back (its health read, not
        assumed): once its keys are queued and the cache holds the bodies written (a key the
        initial list queued would otherwise be checked on the body the poll replaced)."""
        health = self.report.health or {}
        written = {key for key, assessed in health.items() if assessed == APPLIED}
        if not written or not self.leading.is_set():
            return
        if self.queue.wait_for(written, SETTLE_SECONDS, partial(self._written_back, written)):
            self._recheck(self.queue.take(timeout_seconds=0))

    def _written_back(self, keys: set[ObjectKey]) -> bool:
        """Whether the cache holds, for each of `keys`, the body its write answered (the one
        the drift memo measured)."""
        return self.state.memo.measured_all(self.cache.held(keys))

    def _changed(self, key: ObjectKey, body: Body | None) -> None:
        self.reporter.changed(key)
        self.queue.add(key)
        self._check_unless_due(self.checked_at + CHECK_WINDOW_SECONDS)

    def _health_moved(self, key: ObjectKey) -> None:
        self.healths.add(key)
        self._check_unless_due(self.reassessed_at + HEALTH_WINDOW_SECONDS)

    def _check_unless_due(self, window_ends: float) -> None:
        """Asks for a check, unless the clock holds one due by the end of the window this
        change waits for anyway: that one takes the keys queued before it runs (`_due`
        forgets it first, so none is left behind). A change of what gitopsd owns never
        waits for a check held for health's longer window."""
        now = time.monotonic()
        if not now < self.check_due_at <= max(window_ends, now):
            self.check_soon()

    def _check(self) -> None:
        """Checks the queued keys (none: assesses what only moved health), but not before its
        first poll ends, within CHECK_WINDOW_SECONDS of the last, or while a check backs off."""
        if self.stopping.is_set() or self.halt.is_set():
            return
        if not self.busy.acquire(blocking=False):
            return  # the poll or check in flight takes the queue when it ends
        try:
            checked = self._check_queued()
        finally:
            self.busy.release()
        if checked:
            self.on_report()
            if len(self.queue) or len(self.healths):  # changes seen while it ran
                self.check_soon()

    def _check_queued(self) -> bool:
        """Checks the queued keys if it may now; says whether it did."""
        if (window_ends := self.checked_at + CHECK_WINDOW_SECONDS) > time.monotonic():
            self._check_at(window_ends)  # the keys coalesce until then
            return False
        keys = self.queue.take(timeout_seconds=0)
        if not keys or not self.leading.is_set():
            for key in keys:  # a new leader measures everything in its first poll
                self.reporter.seen.pop(key, None)
            return self._reassess()
        if self.state.desired is None or not self.attempted.is_set():
            self.queue.add_all(keys)
        elif not self.recheck_backoff.ready():
            self.queue.add_all(keys)
            self._check_at(self.recheck_backoff.not_before)
        else:
            self.checked_at = time.monotonic()
            with self.deadline.running(), self.reporter.recording():
                self._recheck(keys)
            return True
        return False

    def _reassess(self) -> bool:
        """Assesses again the objects whose health alone moved; says whether one moved."""
        if (window_ends := self.reassessed_at + HEALTH_WINDOW_SECONDS) > time.monotonic():
            if len(self.healths):
                self._check_at(window_ends)  # they wait for the window's end
            return False
        keys = self.healths.take(timeout_seconds=0)
        if not keys or not self.leading.is_set() or self.report.health is None:
            return False  # a poll assesses them all
        self.reassessed_at = time.monotonic()
        return self.reporter.reassessed(self.cache.held(keys), self.config.settings.checks)

    def _check_at(self, due: float) -> None:
        """Has the clock run a check at `due` (monotonic seconds)."""
        if self.timers and not self.halt.is_set():
            self.check_due_at = due
            self.timers.later("check", self._due, due - time.monotonic())

    def _due(self) -> None:
        self.check_due_at = 0.0
        self.check_soon()

    def _recheck(self, keys: set[ObjectKey]) -> None:
        """Measures (and heals) after watch events. The snapshot is taken after `keys` were,
        so it holds each key's event or a newer one; a failed check queues them again."""
        if self.stopping.is_set() or self.halt.is_set():
            return
        try:
            self._once(keys)
            self.recheck_backoff.reset()
        except GitopsdError as error:
            delay = self._failed(error, self.recheck_backoff)
            self.queue.add_all(keys)
            if delay is not None:
                self._check_at(time.monotonic() + delay)
