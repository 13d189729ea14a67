"""The daemon's one clock: whatever runs later goes through it.

Polls on an interval, retries after a backoff (a source's, a GitSync's), a drift check once
a coalescing window or its backoff ends, an announced push a second after the one before,
and the turn a stalled poll frees in the pool: all are APScheduler jobs. A job only hands
work on (to the pool of polls, to a queue, to a waiting thread), so its one thread never
waits on git or the cluster. Retiring a source removes its timers; shutdown stops the
clock, and nothing runs later any more.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler


class Clock:
    def __init__(self) -> None:
        # Its jobs only hand work on: one thread is enough.
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        self._owners = itertools.count(1)

    def start(self) -> None:
        """Runs what is due from now on; what was set before waits until then."""
        self.scheduler.start()

    def stop(self) -> None:
        """Nothing runs later any more: pending jobs are dropped with the scheduler."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def timers(self, owner: str) -> Timers:
        """Timers of their own for `owner`: a successor of the same name has its own, so
        removing a retired one's leaves the successor's."""
        return Timers(self, f"{owner}#{next(self._owners)}")


@dataclass
class Timers:
    """One owner's jobs on the clock: at most one pending of each kind (setting it again
    moves it), and all of them removed together when the owner retires."""

    clock: Clock
    owner: str
    _kinds: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def every(self, kind: str, run: Callable[[], None], seconds: float, jitter: float) -> None:
        """Runs `run` every `seconds`, each time up to `jitter` seconds late, so sources of
        one interval do not all poll together."""
        self._add(kind)
        self.clock.scheduler.add_job(
            run,
            "interval",
            seconds=seconds,
            jitter=jitter,
            id=self._id(kind),
            replace_existing=True,
        )

    def later(self, kind: str, run: Callable[[], None], delay_seconds: float) -> None:
        """Runs `run` once, `delay_seconds` from now, however late the clock gets to it (a
        busy clock must not drop a retry: the next try would wait a whole interval)."""
        when = datetime.now(UTC) + timedelta(seconds=max(delay_seconds, 0.0))
        self._add(kind)
        self.clock.scheduler.add_job(
            run,
            "date",
            run_date=when,
            id=self._id(kind),
            replace_existing=True,
            misfire_grace_time=None,
        )

    def cancel(self, kind: str) -> None:
        with self._lock:
            self._kinds.discard(kind)
        with suppress(JobLookupError):
            self.clock.scheduler.remove_job(self._id(kind))

    def remove(self) -> None:
        with self._lock:
            kinds, self._kinds = self._kinds, set()
        for kind in kinds:
            with suppress(JobLookupError):
                self.clock.scheduler.remove_job(self._id(kind))

    def _add(self, kind: str) -> None:
        with self._lock:
            self._kinds.add(kind)

    def _id(self, kind: str) -> str:
        return f"{self.owner}/{kind}"
