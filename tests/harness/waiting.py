"""Waiting on conditions with deadlines: the suite never sleeps for a fixed time and hopes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], what: str, deadline_seconds: float = 30.0) -> T:
    """Polls `condition` until it returns a truthy value and returns it; fails at the deadline."""
    deadline = time.monotonic() + deadline_seconds
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {deadline_seconds:.0f} s waiting for {what}")
        time.sleep(0.05)
