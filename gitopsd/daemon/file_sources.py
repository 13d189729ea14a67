"""The configuration's sources on this replica: a worker each while they run here (all of
them, or with sharding while this replica's share holds them) and are not suspended, with
their status ConfigMaps written from the workers' reports. A suspension is read from those
ConfigMaps, so it holds across restarts and changes of leader, as a GitSync's spec.suspend
does; a suspended source has no worker, as a suspended GitSync has none."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gitopsd.cluster import Cluster
from gitopsd.configfile import SourceConfig
from gitopsd.daemon.clock import Clock
from gitopsd.daemon.registry import Registry
from gitopsd.daemon.status_maps import StatusMaps
from gitopsd.daemon.worker import SourceWorker
from gitopsd.gitsync import status_map
from gitopsd.gitsync.status import SourceReport
from gitopsd.metrics import Recorder
from gitopsd.reconcile import desired

log = logging.getLogger("gitopsd.daemon")
SUSPENSIONS_READ_SECONDS = 30.0
"""How long a start waits to read the suspensions before it runs the sources anyway."""


@dataclass
class FileSources:
    configs: list[SourceConfig]
    worker_of: Callable[[SourceConfig, Callable[[], None]], SourceWorker]
    """A worker for a source, calling the function given when it reports."""
    registry: Registry
    clock: Clock
    recorder: Recorder
    cluster: Cluster
    """Fenced: only the replica that writes for the configuration's sources writes."""
    control_namespace: str
    """Where their status ConfigMaps are."""
    stopping: threading.Event
    workers: dict[str, SourceWorker] = field(default_factory=dict)
    running: bool = False
    """They run here: always, or with sharding while this replica's share holds them."""
    reports: dict[str, SourceReport] = field(default_factory=dict)
    """What each suspended source saw last, for its status and `gitopsd get`."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    changing: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.maps = StatusMaps(
            self.cluster,
            self.control_namespace,
            self.stopping,
            on_suspend=self._suspension_changed,
            on_request=self.request,
        )

    def run(self) -> None:
        """Starts those not suspended, unless they run already. The suspensions are read
        first: a source suspended before a restart does not sync once after it."""
        if self.configs and not self.maps.wait_synced(SUSPENSIONS_READ_SECONDS):
            where = self.maps.namespace
            log.error("cannot read the sources' suspensions in namespace %s: running all", where)
        with self.lock:
            if self.running or self.stopping.is_set():
                return
            self.running = True
            resting = [c for c in self.configs if self.maps.suspended(c.name)]
            started = [self._start(c) for c in self.configs if c not in resting]
        for worker in started:
            worker.schedule(self.clock.timers(worker.name))
        for config in resting:
            self._publish_suspended(config, self.reports.get(config.name, SourceReport()))

    def retire(self) -> None:
        """Stops them (another replica's share now): their writes are fenced at once, so
        nothing waits for the reconcile in flight; their metric series go with them."""
        with self.lock:
            self.running = False
            retired = list(self.workers.values())
            self.workers.clear()
        for worker in retired:
            self._stop(worker)
            self.recorder.forget(worker.name)

    def running_workers(self) -> list[SourceWorker]:
        with self.lock:
            return list(self.workers.values())

    def knows(self, name: str) -> bool:
        """Source `name` is the configuration's: running here, starting, suspended or
        another replica's share."""
        return any(c.name == name for c in self.configs)

    def runs(self, name: str) -> bool:
        """Source `name` is the configuration's, and runs here unless suspended."""
        with self.lock:
            return self.running and any(c.name == name for c in self.configs)

    def worker(self, name: str) -> SourceWorker | None:
        with self.lock:
            return self.workers.get(name)

    def suspended(self) -> list[tuple[str, SourceReport]]:
        """The suspended sources that would run here, with what each saw last."""
        with self.lock:
            if not self.running:
                return []
            names = [c.name for c in self.configs if c.name not in self.workers]
        return [(name, self.reports.get(name, SourceReport())) for name in names]

    def report_of(self, name: str) -> SourceReport:
        """What suspended source `name` saw last (nothing, if it never ran here)."""
        with self.lock:
            return self.reports.get(name, SourceReport())

    def suspend(self, name: str, suspended: bool) -> None:
        """Suspends or resumes source `name` here now, and in its status ConfigMap for
        every replica and restart (where the watch brings it back, changing nothing)."""
        self.maps.suspend(name, suspended)
        self._suspension_changed(name, suspended)

    def request(self, name: str, token: str) -> None:
        """A request to reconcile source `name` now, from its status ConfigMap."""
        worker = self.worker(name)
        if worker is not None:
            worker.request(token)

    def _suspension_changed(self, name: str, suspended: bool) -> None:
        """One change at a time, whole (its status written too): the watch brings back the
        change `suspend` makes, and `suspend` answers once the status says it."""
        with self.changing:
            self._change_suspension(name, suspended)

    def _change_suspension(self, name: str, suspended: bool) -> None:
        config = next((c for c in self.configs if c.name == name), None)
        with self.lock:
            if config is None or not self.running:
                return
            worker = self.workers.get(name)
            if suspended and worker is not None:
                del self.workers[name]
            elif not suspended and worker is None:
                worker = self._start(config)
            else:
                return
        if suspended:
            self._stop(worker)
            self.reports[name] = worker.report
            self._publish_suspended(config, worker.report)
        else:
            worker.schedule(self.clock.timers(worker.name))

    def _start(self, config: SourceConfig) -> SourceWorker:
        where = _where(config)

        def publish() -> None:
            self.maps.publish(config.name, worker.report, where, suspended=False)

        worker = self.worker_of(config, self.registry.reporting(config.name, publish))
        self.workers[config.name] = worker
        self.registry.add(worker)
        return worker

    def _stop(self, worker: SourceWorker) -> None:
        self.registry.remove(worker)
        worker.retire()

    def _publish_suspended(self, config: SourceConfig, report: SourceReport) -> None:
        self.maps.publish(config.name, report, _where(config), suspended=True)


def _where(config: SourceConfig) -> status_map.Where:
    """Where the source's record is: its ApplySet parent, in the cluster it syncs into."""
    parent = desired.applyset_of(config.settings)
    return status_map.Where(f"{parent.namespace}/{parent.name}", config.cluster_name)
