"""The one backoff: exponential, with jitter, bounded. A retried request, a failed watch and
a failed reconcile all wait this way, each with its own first delay and limit."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass


def jittered(first_seconds: float, max_seconds: float, failures: int) -> float:
    """The wait after `failures` earlier failures: the first delay doubled each time, up to
    the limit, then somewhere between half of it and all of it, so that many clients that
    failed together do not come back together."""
    delay: float = min(first_seconds * 2**failures, max_seconds)
    return delay * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not crypto


@dataclass
class Backoff:
    """The failures of one thing in a row, and when it may try again."""

    first_seconds: float = 1.0
    max_seconds: float = 300.0
    failures: int = 0
    not_before: float = 0.0
    """When it may try again (monotonic seconds)."""

    def ready(self) -> bool:
        return time.monotonic() >= self.not_before

    def failed(self) -> float:
        """Counts a failure: the delay until the next try."""
        delay = jittered(self.first_seconds, self.max_seconds, self.failures)
        self.failures += 1
        self.not_before = time.monotonic() + delay
        return delay

    def reset(self) -> None:
        self.failures, self.not_before = 0, 0.0
