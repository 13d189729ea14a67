"""A tenant's share of the API server: its requests leave at a steady pace.

The API server serves every tenant, the daemon's probes of health and its leases. One
GitSync of 9,500 objects in observe mode, committed to every 5 s, sent 600 dry-runs a
second and doubled another tenant's heal latency at p90 (`make bench`, tenants). So each
namespace's requests share a token bucket, as client-go's QPS and burst do for a whole
controller: a burst goes at once, then `per_second`. A request waits for its turn
(reserved, so the waits are fair between the tenant's threads), never fails for it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Pace:
    per_second: float
    burst: int
    _tokens: float = field(init=False)
    _at: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens, self._at = float(self.burst), time.monotonic()

    def take(self) -> None:
        """Takes one request's token, waiting until the bucket has earned it."""
        time.sleep(self.reserve())

    def reserve(self) -> float:
        """Takes a token now, owed if the bucket is empty: the seconds until it is earned."""
        with self._lock:
            now = time.monotonic()
            earned = (now - self._at) * self.per_second
            self._tokens = min(float(self.burst), self._tokens + earned) - 1
            self._at = now
            return max(0.0, -self._tokens / self.per_second)
