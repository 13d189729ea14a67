"""A source's drift checks after watch events: while the clock holds a check for later, an
event only queues its key, and the check, when due, takes every key queued before it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import cast

from gitopsd.daemon.checks import CHECK_WINDOW_SECONDS, HEALTH_WINDOW_SECONDS, DriftChecks
from gitopsd.daemon.clock import Timers
from gitopsd.daemon.queue import WorkQueue
from gitopsd.daemon.reporter import Reporter
from gitopsd.objects import ObjectKey

KEYS = [ObjectKey("apps", "Deployment", "n", f"web-{n}") for n in range(3)]


class Clock:
    """Holds what is asked to run later, until the test runs it."""

    def __init__(self) -> None:
        self.held: dict[str, Callable[[], None]] = {}

    def later(self, kind: str, run: Callable[[], None], delay_seconds: float) -> None:
        self.held[kind] = run


class Changes:
    """Hears of changes, as a reporter does (only that is asked of it here)."""

    def changed(self, key: ObjectKey) -> None:
        pass


class Checks(DriftChecks):
    def __init__(self) -> None:
        self.queue, self.healths = WorkQueue(), WorkQueue()
        self.halt = threading.Event()
        self.clock = Clock()
        self.timers = cast(Timers, self.clock)
        self.check_due_at = 0.0
        self.checked_at = self.reassessed_at = float("-inf")
        self.asked = 0

        def ask() -> None:
            self.asked += 1

        self.check_soon = ask


def test_events_while_a_check_is_held_for_later_only_queue_and_the_due_check_takes_them() -> None:
    checks = Checks()
    checks._health_moved(KEYS[0])
    assert checks.asked == 1  # nothing held: a check is asked for

    checks.reassessed_at = time.monotonic()  # health's window: the check waits
    checks._check_at(checks.reassessed_at + HEALTH_WINDOW_SECONDS)
    checks._health_moved(KEYS[1])
    checks._health_moved(KEYS[2])
    assert checks.asked == 1 and checks.healths.take(0) == set(KEYS)

    checks.clock.held["check"]()  # due
    assert checks.asked == 2 and checks.check_due_at == 0.0
    checks._health_moved(KEYS[0])
    assert checks.asked == 3  # none held any more: each event asks again


def test_a_change_of_what_gitopsd_owns_never_waits_for_a_check_held_for_health() -> None:
    """An edit during a rollout is checked within the check window, not health's second."""
    checks = Checks()
    checks.reporter = cast(Reporter, Changes())
    checks.reassessed_at = time.monotonic()
    checks._check_at(checks.reassessed_at + HEALTH_WINDOW_SECONDS)

    checks._changed(KEYS[0], None)
    assert checks.asked == 1

    checks.checked_at = time.monotonic()  # a check just ran: the next waits its window
    checks._check_at(checks.checked_at + CHECK_WINDOW_SECONDS)
    checks._changed(KEYS[1], None)
    assert checks.asked == 1 and checks.queue.take(0) == {KEYS[0], KEYS[1]}
