"""The renders in flight across the daemon, bounded as a whole and shared fairly between
namespaces (`RenderSlots`).

Each render is bounded on its own (`SandboxBounds.render_memory_bytes`), but the poll
threads of many tenants may render at once: several render bombs together would pass the
pod's memory limit that none passes alone. So a render first takes one of a few slots. One
namespace may hold all but one of them, so another namespace always finds one free or
next; a freed slot goes to the namespace waiting with the fewest renders in flight, then to
the one that started a render least recently, then to whoever waited longest. A render that
gets no slot within its deadline fails (a transient error: its poll backs off and tries
again), naming the bound.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gitopsd.errors import SourceError, SourceReason
from gitopsd.sandbox_bounds import SANDBOX_SETTINGS


@dataclass(frozen=True)
class _Waiter:
    namespace: str
    ticket: int  # the order it came in


class RenderSlots:
    """At most `total` renders at once, at most `total - 1` (and at least one) for one
    namespace; a render waits at most `wait_seconds` for its slot."""

    def __init__(self, total: int, wait_seconds: float) -> None:
        self.total, self.wait_seconds = total, wait_seconds
        self.per_namespace = max(1, total - 1)
        self._changed = threading.Condition()
        self._in_flight: Counter[str] = Counter()
        self._waiting: list[_Waiter] = []
        self._tickets = itertools.count()
        self._last_start: dict[str, int] = {}

    @contextmanager
    def held(self, namespace: str, what: str) -> Iterator[None]:
        """A slot for a render of `namespace`'s while the block runs; raises SourceError,
        naming `what` and the bound, when none comes within the deadline."""
        self._take(namespace, what)
        try:
            yield
        finally:
            self._give_back(namespace)

    def _take(self, namespace: str, what: str) -> None:
        with self._changed:
            waiter = _Waiter(namespace, next(self._tickets))
            self._waiting.append(waiter)
            try:
                turn = self._changed.wait_for(lambda: self._next() == waiter, self.wait_seconds)
            finally:
                self._waiting.remove(waiter)
                self._changed.notify_all()  # the next in line may be another now
            if not turn:
                raise SourceError(self._no_slot(namespace, what), SourceReason.TIMEOUT)
            self._in_flight[namespace] += 1
            self._last_start[namespace] = waiter.ticket

    def _give_back(self, namespace: str) -> None:
        with self._changed:
            self._in_flight[namespace] -= 1
            if not self._in_flight[namespace]:
                del self._in_flight[namespace]
            self._changed.notify_all()

    def _next(self) -> _Waiter | None:
        """Who starts when a slot is free: among the waiters whose namespace is under its
        share, the fewest in flight, then the least recently started, then the first in."""
        if self._in_flight.total() >= self.total:
            return None
        allowed = [w for w in self._waiting if self._in_flight[w.namespace] < self.per_namespace]
        return min(allowed, key=self._priority, default=None)

    def _priority(self, waiter: _Waiter) -> tuple[int, int, int]:
        namespace = waiter.namespace
        return (self._in_flight[namespace], self._last_start.get(namespace, -1), waiter.ticket)

    def _no_slot(self, namespace: str, what: str) -> str:
        total = SANDBOX_SETTINGS["renders_in_flight"]
        wait = SANDBOX_SETTINGS["render_queue_seconds"]
        return (
            f"{what} waited {self.wait_seconds:g} s ({wait}) for a render slot and got none: "
            f"the daemon's renders in flight are at most {self.total} ({total}), at most "
            f"{self.per_namespace} for one namespace; {namespace} had "
            f"{self._in_flight[namespace]} running"
        )
