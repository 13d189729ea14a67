"""Work that coalesces: the informer -> queue -> reconcile pattern, keys retried after a
backoff, and the pool of threads that runs every source's polls."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from gitopsd.backoff import Backoff
from gitopsd.daemon.clock import Timers
from gitopsd.objects import ObjectKey

log = logging.getLogger("gitopsd.daemon")


class WorkQueue:
    """Keys waiting to be looked at: a key queued twice before it is taken counts once, so
    a storm of events coalesces into what it changed."""

    def __init__(self) -> None:
        self._keys: set[ObjectKey] = set()
        self._ready = threading.Condition()
        self._closed = False

    def add(self, key: ObjectKey) -> None:
        self.add_all({key})

    def add_all(self, keys: set[ObjectKey]) -> None:
        with self._ready:
            self._keys |= keys
            self._ready.notify()

    def take(self, timeout_seconds: float | None = None) -> set[ObjectKey]:
        """Every queued key, once there is one (none: after the timeout, or once closed)."""
        with self._ready:
            self._ready.wait_for(lambda: bool(self._keys) or self._closed, timeout_seconds)
            batch, self._keys = self._keys, set()
        return batch

    def close(self) -> None:
        """Nothing more is taken: a take waiting returns at once, and any after it."""
        with self._ready:
            self._closed = True
            self._keys.clear()
            self._ready.notify_all()

    def wait_for(
        self,
        keys: set[ObjectKey],
        timeout_seconds: float,
        ready: Callable[[], bool] = lambda: True,
    ) -> bool:
        """Whether every one of `keys` is queued, and `ready()` holds, within the timeout
        (`ready` is asked again at each key queued; keys left queued are checked later)."""
        with self._ready:
            return self._ready.wait_for(lambda: keys <= self._keys and ready(), timeout_seconds)

    def __len__(self) -> int:
        with self._ready:
            return len(self._keys)


@dataclass
class Retries:
    """Keys that failed, each handed to `again` at the end of its backoff, by the clock (a
    rate-limited queue's half of client-go's workqueue): a key's backoff grows with each
    failure in a row and ends with its first success."""

    timers: Timers
    again: Callable[[ObjectKey], None]
    _backoffs: dict[ObjectKey, Backoff] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, key: ObjectKey) -> float:
        """Counts a failure of `key`: the delay until it is handed on again."""
        with self._lock:
            delay = self._backoffs.setdefault(key, Backoff()).failed()
        self.timers.later(str(key), partial(self.again, key), delay)
        return delay

    def succeeded(self, key: ObjectKey) -> None:
        with self._lock:
            failed = self._backoffs.pop(key, None) is not None
        if failed:
            self.timers.cancel(str(key))

    def now(self, namespace: str) -> None:
        """Those of `namespace` waiting out a backoff are handed on now, not when a backoff
        that may have grown to minutes ends; it goes on if they fail again."""
        with self._lock:
            waiting = [key for key in self._backoffs if key.namespace == namespace]
        for key in waiting:
            self.timers.later(str(key), partial(self.again, key), 0.0)


class Pool:
    """The threads that run the daemon's polls, bounded by configuration, not by the number
    of sources: `threads` polls run at once, and the rest wait their turn, first come,
    first served. A poll that runs past `stalled_seconds` (a git host that hangs, until
    git's own timeout) stops counting against `threads`, so it never delays the others
    (the clock wakes the threads that wait when it stalls); at most `most` threads exist
    in all. The jobs of one tenant (a GitSync's namespace) hold at most `tenant_threads`
    of them at once (tenantQuota.threads; None: half of `most`), stalled or not, so a
    tenant of many GitSyncs, or whose GitSyncs name hosts that hang, cannot take the
    threads, nor the time, of the others (the configuration's own sources, tenant "", are
    not held back).

    A job is requested through the function `coalesced` returns: a request while it waits
    is that same request, and one while it runs has it run once more after (what was asked
    for may have changed meanwhile), so a burst costs at most two runs, no job runs twice
    at once, and no request is lost. An urgent job (a drift check after a watch event,
    which heals within about a second) goes before every job that is not."""

    def __init__(
        self,
        threads: int,
        name: str,
        stalled_seconds: float,
        most: int,
        timers: Timers,
        tenant_threads: int | None = None,
    ) -> None:
        self.threads, self.name, self.timers = threads, name, timers
        self.stalled_seconds, self.most = stalled_seconds, most
        self.tenant_threads = max(tenant_threads or most // 2, 1)
        self._waiting: deque[_Job] = deque()
        self._urgent: deque[_Job] = deque()
        self._running: set[_Job] = set()
        self._changed = threading.Condition()
        self._started = 0
        self._idle = 0
        self._progressed_at = time.monotonic()
        """When a job last started or ended, or began to wait with none before it."""
        self._stall_wakes_at: float | None = None
        """When the clock wakes the waiting threads for the next poll that stalls."""

    def coalesced(
        self, work: Callable[[], None], name: str, tenant: str = "", urgent: bool = False
    ) -> Callable[[], None]:
        job = _Job(work, name, tenant, urgent)
        return lambda: self._request(job)

    def _request(self, job: _Job) -> None:
        with self._changed:
            if job in self._running:
                job.again = True
            elif not job.waiting:
                self._enqueue(job)

    def stuck_seconds(self) -> float:
        """How long jobs have waited while none started or ended (0: none waits)."""
        with self._changed:
            if not self._any_waiting():
                return 0.0
            return time.monotonic() - self._progressed_at

    def _enqueue(self, job: _Job) -> None:
        if not self._any_waiting():
            self._progressed_at = time.monotonic()
        job.waiting = True
        (self._urgent if job.urgent else self._waiting).append(job)
        self._keep_one_waiting()
        self._changed.notify_all()

    def _keep_one_waiting(self) -> None:
        """While jobs wait, a thread waits with them (up to `most`), to take the turn a poll
        that stalls frees: the threads that run are busy."""
        if self._any_waiting() and self._idle == 0 and self._started < self.most:
            self._started += 1
            name = f"{self.name}-{self._started}"
            self._idle += 1  # counted from now: the next request need not start another
            threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        counted = True  # as idle, by _keep_one_waiting
        while True:
            job = self._next(counted)
            counted = False
            try:
                job.work()
            except Exception:  # the thread must live on to serve the jobs that follow
                log.exception("%s failed", job.name)
            with self._changed:
                self._running.discard(job)
                self._progressed_at = time.monotonic()
                if job.again:
                    job.again = False
                    self._enqueue(job)
                self._changed.notify_all()  # a turn is free

    def _next(self, counted: bool) -> _Job:
        with self._changed:
            self._idle += 0 if counted else 1
            while (job := self._eligible()) is None or self._counted() >= self.threads:
                self._wake_at_the_next_stall()
                self._changed.wait()
            self._idle -= 1
            (self._urgent if job.urgent else self._waiting).remove(job)
            job.waiting, job.started = False, time.monotonic()
            self._progressed_at = job.started
            self._running.add(job)
            self._keep_one_waiting()
            return job

    def _eligible(self) -> _Job | None:
        """The first waiting job (urgent ones first) whose tenant holds fewer than its share
        of the threads."""
        held: dict[str, int] = {}
        for job in self._running:
            held[job.tenant] = held.get(job.tenant, 0) + 1
        for job in (*self._urgent, *self._waiting):
            if not job.tenant or held.get(job.tenant, 0) < self.tenant_threads:
                return job
        return None

    def _counted(self) -> int:
        """The running polls that count against `threads`: those not stalled."""
        return len(self._not_stalled())

    def _not_stalled(self) -> list[_Job]:
        recent = time.monotonic() - self.stalled_seconds
        return [job for job in self._running if job.started > recent]

    def _wake_at_the_next_stall(self) -> None:
        """Has the clock wake the waiting threads when the first running poll stalls and
        frees a turn (unless it will already, or none will)."""
        counted = self._not_stalled()
        if not (self._any_waiting() and counted):
            return
        stalls_at = min(job.started for job in counted) + self.stalled_seconds
        if stalls_at != self._stall_wakes_at:
            self._stall_wakes_at = stalls_at
            self.timers.later("stall", self._stalled, stalls_at - time.monotonic())

    def _stalled(self) -> None:
        with self._changed:
            self._stall_wakes_at = None  # woken: a waiting thread sets the next
            self._changed.notify_all()

    def _any_waiting(self) -> bool:
        return bool(self._urgent or self._waiting)


@dataclass(eq=False)
class _Job:
    work: Callable[[], None]
    name: str
    tenant: str
    urgent: bool
    waiting: bool = False
    started: float = 0.0
    again: bool = False
