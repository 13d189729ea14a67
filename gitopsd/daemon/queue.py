"""A de-duplicating, rate-limited work queue: the informer -> queue -> reconcile pattern."""

from __future__ import annotations

import threading
import time

from gitopsd.objects import ObjectKey


class WorkQueue:
    """Keys waiting for a drift check. A key queued twice before it is taken counts once;
    batches are taken at most every `min_interval_seconds`, so a storm of events coalesces."""

    def __init__(self, min_interval_seconds: float = 0.1) -> None:
        self._keys: set[ObjectKey] = set()
        self._ready = threading.Condition()
        self._min_interval = min_interval_seconds
        self._last_take = 0.0

    def add(self, key: ObjectKey) -> None:
        self.add_all({key})

    def add_all(self, keys: set[ObjectKey]) -> None:
        with self._ready:
            self._keys |= keys
            self._ready.notify()

    def take(self, timeout_seconds: float) -> set[ObjectKey]:
        """Every queued key (possibly none, after the timeout)."""
        pause = self._last_take + self._min_interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        with self._ready:
            self._ready.wait_for(lambda: bool(self._keys), timeout_seconds)
            batch, self._keys = self._keys, set()
        self._last_take = time.monotonic()
        return batch

    def __len__(self) -> int:
        with self._ready:
            return len(self._keys)
