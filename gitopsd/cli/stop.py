"""SIGINT and SIGTERM, caught for the length of one command."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator


class Stop:
    """SIGINT or SIGTERM, caught: the writes in flight finish, no other write or dry-run
    starts (the cluster is fenced) but the ApplySet parent's record of what was applied,
    nothing is pruned, the command reports what it did and exits 128 + the signal's number
    (130, 143)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.started = time.monotonic()
        self.after = 0.0
        """Seconds from the command's start to the signal."""

    @contextlib.contextmanager
    def caught(self) -> Iterator[None]:
        self.signal, self.started = None, time.monotonic()
        handlers = {number: signal.signal(number, self._catch) for number in STOP_SIGNALS}
        try:
            yield
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)

    def _catch(self, number: int, frame: object) -> None:
        if self.signal is None:
            self.after = time.monotonic() - self.started
        self.signal = number

    def running(self) -> bool:
        return self.signal is None

    def stopped(self) -> bool:
        return self.signal is not None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP = Stop()
"""Signals reach a process, not a command: one stop flag, reset by each `main`."""
