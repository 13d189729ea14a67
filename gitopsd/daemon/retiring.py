"""Sources retired without holding up the GitSync controller: a worker whose reconcile is
in flight (a fetch that hangs, until its deadline) is waited for on a thread of its own,
and its GitSync's next step (its new source, or the withdrawal of its objects) waits for
it, while the other GitSyncs are served."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gitopsd.daemon.worker import SourceWorker
from gitopsd.objects import ObjectKey

GRACE_SECONDS = 30.0
"""How long a retired source's reconcile in flight may take to end (its writes are fenced
at once) before its GitSync's next step goes on."""


@dataclass
class Retirements:
    ended: Callable[[ObjectKey], None]
    """Hears that the worker retired for a GitSync is done with: its next step may go on."""
    grace_seconds: float = GRACE_SECONDS
    _waited: dict[ObjectKey, SourceWorker] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def retire(self, key: ObjectKey, worker: SourceWorker) -> None:
        """Retires `worker` now (its writes fenced), and waits for its reconcile in flight
        to end, if one is, on a thread of its own."""
        worker.retire()
        if worker.ended(timeout_seconds=0):
            return
        with self._lock:
            self._waited[key] = worker
        name = f"retire-{key.namespace}/{key.name}"
        threading.Thread(target=self._await, args=(key, worker), name=name, daemon=True).start()

    def pending(self, key: ObjectKey) -> bool:
        """Whether the worker last retired for `key` may still be reconciling."""
        with self._lock:
            return key in self._waited

    def _await(self, key: ObjectKey, worker: SourceWorker) -> None:
        worker.ended(self.grace_seconds)
        with self._lock:
            if self._waited.get(key) is worker:
                del self._waited[key]
        self.ended(key)
