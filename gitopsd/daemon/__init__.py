"""`gitopsd run`: keeps every configured source in sync until SIGTERM.

One APScheduler interval job per source polls git; watch caches turn live edits into
drift checks within about a second; a Lease elects the one replica that writes.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry

from gitopsd import configfile
from gitopsd.cluster import Cluster
from gitopsd.cluster.lease import LeaderElector
from gitopsd.cluster.watches import Watches
from gitopsd.configfile import DaemonConfig, SourceConfig
from gitopsd.daemon import http, logs
from gitopsd.daemon.control import Control
from gitopsd.daemon.controller import GitSyncController
from gitopsd.daemon.queue import Pool
from gitopsd.daemon.registry import Registry
from gitopsd.daemon.worker import SourceWorker
from gitopsd.errors import ConfigError
from gitopsd.metrics import Recorder
from gitopsd.reconcile import desired
from gitopsd.source import FetchLedger

log = logging.getLogger("gitopsd.daemon")
STALLED_POLL_SECONDS = 10.0
"""A poll running this long (a git host that hangs, until git's 60 s timeout) no longer
holds a turn of the pool: the other sources' polls go on."""
STALLED_THREADS = 4
"""The pool's threads at most, stalled ones included, per turn (concurrentReconciles)."""
SOURCE_ALLOWS_INSECURE = "the source says allowInsecure: true"
"""What permits a source's file:// or http:// repository, as its refusal says."""


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.set_aside = list(config.invalid_sources)
        sources = self._usable(config.sources)
        self.stopping = threading.Event()
        self.leading = threading.Event()
        self.registry = CollectorRegistry()
        self.recorder = Recorder(self.registry, config.object_series_budget)
        self.cluster = Cluster.connect(
            config.kubeconfig, config.context, config.allow_exec_credentials
        )
        self.recorder.count_api_requests(self.cluster.api.counters.snapshot)
        self.elector = self._elector()
        self.cluster.may_write = self._may_write
        self.fetches = FetchLedger()
        self.watches = Watches(self.stopping)
        threads = config.concurrent_reconciles
        self.pool = Pool(threads, "reconcile", STALLED_POLL_SECONDS, STALLED_THREADS * threads)
        self.workers = [self._worker(source) for source in sources]
        self.sources = Registry()
        for worker in self.workers:
            self.sources.add(worker)
        # The scheduler's jobs only put polls in the pool's queue: one thread is enough.
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        self.controller = self._controller(sources)

    def _controller(self, sources: list[SourceConfig]) -> GitSyncController | None:
        """Operator mode, if enabled: GitSyncs beside the file sources. Their polls run in
        the daemon's pool, as the file sources' do."""
        if not self.config.git_syncs.enabled:
            return None
        parents = frozenset((s.settings.name, s.settings.inventory_namespace) for s in sources)
        return GitSyncController(
            settings=self.config.git_syncs,
            cluster=self.cluster,
            recorder=self.recorder,
            cache_dir=self.config.cache_dir,
            leading=self.leading,
            stopping=self.stopping,
            scheduler=self.scheduler,
            sources=self.sources,
            pool=self.pool,
            fetches=self.fetches,
            watches=self.watches,
            taken_parents=parents,
        )

    def _usable(self, sources: tuple[SourceConfig, ...]) -> list[SourceConfig]:
        """The sources whose repository gitopsd may fetch; the others are set aside. With
        none left of those configured, that is a configuration error (with none configured,
        the daemon serves its health and metrics until its configuration names some)."""
        usable = []
        for source in sources:
            try:
                desired.check_source(source.spec, SOURCE_ALLOWS_INSECURE)
            except ConfigError as error:
                self.set_aside.append((source.name, f"source {source.name}: {error}"))
            else:
                usable.append(source)
        if self.set_aside and not usable:
            errors = "\n".join(error for _, error in self.set_aside)
            raise ConfigError(f"no source can run:\n{errors}")
        return usable

    def _elector(self) -> LeaderElector | None:
        election = self.config.leader_election
        if not election.enabled:
            self.leading.set()
            self.recorder.set_leader(True)
            return None
        return LeaderElector(
            self.cluster,
            election.namespace,
            election.name,
            f"{socket.gethostname()}_{os.getpid()}",
            election.lease_seconds,
            election.renew_deadline_seconds,
            election.retry_seconds,
            self._leadership,
        )

    def _may_write(self) -> bool:
        """Fencing, checked before every write: none once shutting down, none without the
        lease (a replica that lost it learns so from its own clock, before writing)."""
        leader = self.elector is None or self.elector.is_leader()
        return leader and not self.stopping.is_set()

    def _leadership(self, leading: bool) -> None:
        self.recorder.set_leader(leading)
        if leading:
            self.leading.set()
            for worker in self.sources.workers():
                worker.forget_applied()
                worker.poll_soon()
            if self.controller:
                self.controller.requeue_all()
        else:
            self.leading.clear()

    def _worker(self, source: SourceConfig) -> SourceWorker:
        return SourceWorker(
            config=source,
            cluster=self.cluster,
            recorder=self.recorder,
            cache_dir=self.config.cache_dir / "sources",
            leading=self.leading,
            stopping=self.stopping,
            pool=self.pool,
            fetches=self.fetches,
            watches=self.watches,
        )

    def ready(self) -> bool:
        """Leadership known, the API server reachable, every source tried and its watch
        caches synced: false during an outage, true again once the caches caught up."""
        known = self.elector is None or self.elector.state_known
        reachable = self.cluster.api.reachable
        serving = self.controller is None or self.controller.ready()
        workers = all(worker.ready() for worker in self.workers)
        return known and reachable and serving and workers

    def run(self) -> int:
        for name, error in self.set_aside:
            self.recorder.error(name, ConfigError.stage, ConfigError.reason)
            log.error("set aside: %s", error, extra={"source": name})
        endpoints = http.Endpoints(self.registry, self.ready, self._hooks())
        server = http.serve(self.config.listen_address, endpoints)
        control = Control(self.sources.workers, self.leading.is_set, lambda: list(self.set_aside))
        control_server = http.serve_control(self.config.control_address, control)
        log.info("serving /metrics, /healthz, /readyz and /hooks on %s", self.config.listen)
        log.info("serving the control API on %s", self.config.control_listen)
        if self.elector:
            self.elector.start()
        self._schedule()
        if self.controller:
            self.controller.start()
        self._wait_for_a_signal()
        self._shut_down()
        server.shutdown()
        control_server.shutdown()
        return 0

    def _schedule(self) -> None:
        for worker in self.workers:
            worker.schedule(self.scheduler, worker.name)
        self.scheduler.start()

    def _hooks(self) -> Callable[[str], http.Hook | None]:
        """The webhooks by path: a file source's at its name, a GitSync's at
        gitsyncs/NAMESPACE/NAME."""
        sources = {
            worker.name: http.Hook(worker.config.webhook_secret, worker.announced)
            for worker in self.workers
            if worker.config.webhook_secret is not None
        }
        controller = self.controller

        def hook_of(path: str) -> http.Hook | None:
            found = sources.get(path)
            return found or (controller.hook_of(path) if controller else None)

        return hook_of

    def stop(self, *_: object) -> None:
        self.stopping.set()

    def _wait_for_a_signal(self) -> None:
        """Python runs a signal's handler only in the main thread, between bytecodes, so
        the main thread waits in short steps rather than in one wait that nothing but the
        signal could end (a replica once outlived SIGTERM by a minute, cause unknown)."""
        while not self.stopping.wait(timeout=1.0):
            continue

    def _shut_down(self) -> None:
        """No new work (writes are fenced from now on), the reconcile in flight ends at its
        next write or on its own within the grace period, then the lease is given up."""
        log.info("shutting down")
        self.scheduler.shutdown(wait=False)
        deadline = time.monotonic() + self.config.shutdown_grace_seconds
        for worker in self.sources.workers():
            worker.retire(grace_seconds=max(deadline - time.monotonic(), 0))
        if self.elector:
            self.elector.release()
        log.info("stopped")


def run(config_path: Path, level: str = "info", form: str | None = None) -> int:
    """The daemon, logging lines of `level` and above as `form` (json, text; None: text on
    a terminal, else json)."""
    logs.configure(sys.stderr, logging.getLevelNamesMapping()[level.upper()], form)
    signal.signal(signal.SIGUSR1, logs.log_every_threads_stack)
    daemon = Daemon(configfile.load(config_path))
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    return daemon.run()
