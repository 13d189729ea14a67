"""Every source a daemon runs, file sources and GitSyncs alike, by name: who waits for
whom. A source applies a new revision only once those it depends on are ready, and polls
again as soon as one of them reports. (A file source's dependencies are file sources; a
GitSync's are GitSyncs, named namespace/name.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from gitopsd.configfile import SourceConfig
from gitopsd.daemon.worker import SourceWorker
from gitopsd.gitsync.status import unready


@dataclass
class Registry:
    elsewhere: Callable[[str], str]
    """Why a source not running here is not ready ("" once it is): with sharding, a
    GitSync of another namespace may be another replica's, read from its status."""
    running: dict[str, SourceWorker] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, worker: SourceWorker) -> None:
        with self.lock:
            self.running[worker.name] = worker

    def dependencies_of(self, config: SourceConfig) -> Callable[[], str]:
        """Why source `config` must wait (those it depends on are not ready), or "": what
        its worker asks before it applies a new revision."""
        return partial(self.waiting_for, config.depends_on)

    def reporting(self, name: str, on_report: Callable[[], None]) -> Callable[[], None]:
        """What source `name`'s worker calls when it reports: `on_report`, then those
        waiting for it hear of it."""

        def reported() -> None:
            on_report()
            self.reported(name)

        return reported

    def remove(self, worker: SourceWorker) -> None:
        with self.lock:
            if self.running.get(worker.name) is worker:
                del self.running[worker.name]

    def workers(self) -> list[SourceWorker]:
        with self.lock:
            return list(self.running.values())

    def waiting_for(self, needed: Iterable[str]) -> str:
        """Why the sources `needed` are not ready yet, or "" when all are."""
        with self.lock:
            workers = dict(self.running)
        reasons = []
        for name in needed:
            worker = workers.get(name)
            why = unready(worker.report) if worker else self.elsewhere(name)
            if why:
                reasons.append(f"source {name}: {why}")
        return "; ".join(reasons)

    def reported(self, name: str) -> None:
        """Source `name` reported: those waiting for it look again at once."""
        for worker in self.workers():
            if name in worker.config.depends_on and worker.report.waiting:
                worker.poll_soon()
