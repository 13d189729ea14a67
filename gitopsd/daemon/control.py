"""What `gitopsd get` and `gitopsd reconcile` ask of a running daemon: the state of its
sources, and a reconcile now. Served by http.py to loopback clients only: on a laptop that
is the user, in a pod `kubectl port-forward`, whose connections arrive from loopback."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gitopsd.daemon.worker import SourceWorker
from gitopsd.gitsync.status import Status, status_of, summary


@dataclass(frozen=True)
class Control:
    workers: Callable[[], list[SourceWorker]]
    """Every source running now: the configuration's, and the GitSyncs served."""

    def sources(self) -> list[Status]:
        """A `gitopsd get` line per source, in the words of a GitSync's status."""
        return [_line(worker) for worker in sorted(self.workers(), key=lambda w: w.name)]

    def reconcile(self, name: str) -> str | None:
        """Asks source `name` to reconcile now; the token its line will show as
        lastHandledReconcileAt once that reconcile is done (None: no such source)."""
        worker = next((w for w in self.workers() if w.name == name), None)
        if worker is None:
            return None
        token = str(time.time_ns())
        worker.request(token)
        return token


def _line(worker: SourceWorker) -> Status:
    report = worker.report
    failure = report.failure
    line = summary(worker.name, status_of(0, report, None), suspended=False)
    return line | {"stage": failure.stage if failure else "", "finished": report.finished}
