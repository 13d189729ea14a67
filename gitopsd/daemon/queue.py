"""Work that coalesces: the informer -> queue -> reconcile pattern, and triggered runs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gitopsd.objects import ObjectKey

log = logging.getLogger("gitopsd.daemon")


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


class Coalesced:
    """Runs `work` in one background thread on request. Requests made while it runs fold
    into one more run after it (what they asked for may have changed meanwhile), so a
    burst of requests costs at most two runs and one thread, and none is lost."""

    def __init__(self, work: Callable[[], None], name: str) -> None:
        self._work = work
        self._name = name
        self._lock = threading.Lock()
        self._running = False
        self._again = False

    def request(self) -> None:
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
        threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                self._work()
            except Exception:  # the thread must live on to serve the requests that follow
                log.exception("%s failed", self._name)
            if not self._requested_again():
                return

    def _requested_again(self) -> bool:
        with self._lock:
            again, self._again = self._again, False
            self._running = again
            return again
