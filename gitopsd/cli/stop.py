"""SIGINT and SIGTERM, caught for the length of one command."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Stop:
    """SIGINT or SIGTERM, caught: the writes in flight finish, no other write or dry-run
    starts (the cluster is fenced) but the ApplySet parent's record of what was applied,
    nothing is pruned, the command reports what it did and exits 128 + the signal's number
    (130, 143)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @contextlib.contextmanager
    def caught(self) -> Iterator[None]:
        self.signal = None
        handlers = {number: signal.signal(number, self._catch) for number in STOP_SIGNALS}
        try:
            yield
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)

    def _catch(self, number: int, frame: object) -> None:
        self.signal = number

    def running(self) -> bool:
        return self.signal is None

    def stopped(self) -> bool:
        return self.signal is not None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP = Stop()
"""Signals reach a process, not a command: one stop flag, reset by each `main`."""
