"""Whose health rule the evaluator runs next (`Turns`): namespaces in turn, each within its
share of the evaluator's time.

The evaluator (`gitopsd.sandbox.expressions`) is one worker, and one rule may take it up to
the deadline of health rules (sandbox.expressionTimeout, 2 s). Behind a lock, a tenant whose
reconcile asked rules of almost 2 s one after another held the evaluator for as long as it
had objects: the thread that let go took the lock again before another woke, so another
tenant's health checks waited behind all of them. Here a free evaluator goes to the
namespace served least recently among those waiting, so another's rule waits for at most
one evaluation of each namespace ahead of it; and each namespace's share of the evaluator's
time (tenantQuota.healthRuleSecondsPerMinute) bounds how often its rules are in the way at
all: one that spent its share waits until it is earned back. The admin's sources (namespace
"") take turns too, with no share to spend.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ADMIN = ""
"""The namespace of the configuration file's own sources, held to no share."""
SHARE_SETTING = "tenantQuota.healthRuleSecondsPerMinute"

log = logging.getLogger("gitopsd.sandbox")


@dataclass(frozen=True)
class _Waiter:
    namespace: str
    ticket: int  # the order it came in


@dataclass(frozen=True)
class _Spent:
    left: float
    """Seconds of the share left, below zero once an evaluation took more than was left."""
    at: float
    """When `left` was counted; the share is earned back from then on."""


class Closed(Exception):
    """The daemon is stopping: no more turns are given."""


class Turns:
    """One evaluation at a time; each namespace may use `seconds_per_minute` of them a minute,
    all of it at once if it has not used any for a minute."""

    def __init__(
        self, seconds_per_minute: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.share, self.earned_per_second = seconds_per_minute, seconds_per_minute / 60
        self.clock = clock
        self._changed = threading.Condition()
        self._waiting: list[_Waiter] = []
        self._tickets = itertools.count()
        self._turns_given = itertools.count()
        self._busy = False
        self._last_served: dict[str, int] = {}
        """The turn each namespace was given last: by when it was served, not when its
        waiter came, or a namespace of many waiters would look unserved after each turn."""
        self._spent: dict[str, _Spent] = {}
        """Namespaces that have less than their whole share left."""
        self._told: set[str] = set()
        """Namespaces waiting for their share, logged once until they are served."""
        self._closed = False

    @contextmanager
    def turn(self, namespace: str) -> Iterator[None]:
        """The evaluator for `namespace` while the block runs, charged to its share; raises
        Closed once `close` was called, at once or when the wait ends."""
        self._take(namespace)
        started = self.clock()
        try:
            yield
        finally:
            self._give_back(namespace, self.clock() - started)

    def close(self) -> None:
        """Ends every wait for a turn, now and later (the daemon is stopping: a share may
        take a minute to come back, its grace period is shorter)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def left(self, namespace: str) -> float:
        """Seconds of its share `namespace` has left now (infinite for the admin's)."""
        if namespace == ADMIN:
            return math.inf
        spent = self._spent.get(namespace)
        if spent is None:
            return self.share
        earned = (self.clock() - spent.at) * self.earned_per_second
        return min(self.share, spent.left + earned)

    def _take(self, namespace: str) -> None:
        with self._changed:
            waiter = _Waiter(namespace, next(self._tickets))
            self._waiting.append(waiter)
            try:
                while not self._closed and self._next() != waiter:
                    self._tell_if_short(namespace)
                    if not self._changed.wait(self._until_a_share_returns()):
                        self._changed.notify_all()  # a share came back: maybe another's
            finally:
                self._waiting.remove(waiter)
            if self._closed:
                raise Closed
            self._told.discard(namespace)
            self._busy = True
            self._last_served[namespace] = next(self._turns_given)

    def _give_back(self, namespace: str, took: float) -> None:
        with self._changed:
            self._busy = False
            if namespace != ADMIN:
                self._spent[namespace] = _Spent(self.left(namespace) - took, self.clock())
            self._forget_whole_shares()
            self._changed.notify_all()

    def _next(self) -> _Waiter | None:
        """Who runs once the evaluator is free: among the waiters with some share left, the
        namespace served least recently, then the first in."""
        if self._busy:
            return None
        allowed = [waiter for waiter in self._waiting if self.left(waiter.namespace) > 0]
        return min(allowed, key=self._priority, default=None)

    def _priority(self, waiter: _Waiter) -> tuple[int, int]:
        return (self._last_served.get(waiter.namespace, -1), waiter.ticket)

    def _until_a_share_returns(self) -> float | None:
        """Seconds until a waiter's share is above zero again; None: a release wakes them."""
        short = [-self.left(w.namespace) for w in self._waiting if self.left(w.namespace) <= 0]
        if self._busy or not short:
            return None
        return min(short) / self.earned_per_second + 0.001

    def _tell_if_short(self, namespace: str) -> None:
        """Logs, once a wait, that `namespace`'s rules wait for their share: why its health
        checks are slow, for its tenant and the admin."""
        left = self.left(namespace)
        if left > 0 or namespace in self._told:
            return
        self._told.add(namespace)
        log.warning(
            "health rules of namespace %s used their share of the evaluator, %g s a minute "
            "(%s); the next waits %.1f s for it",
            namespace,
            self.share,
            SHARE_SETTING,
            -left / self.earned_per_second,
        )

    def _forget_whole_shares(self) -> None:
        whole = [namespace for namespace in self._spent if self.left(namespace) >= self.share]
        for namespace in whole:
            del self._spent[namespace]
