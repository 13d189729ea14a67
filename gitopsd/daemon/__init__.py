"""`gitopsd run`: keeps every configured source in sync until SIGTERM.

One clock (APScheduler) polls each source on its interval and runs whatever else comes
later (retries after a backoff, coalesced drift checks); watch caches turn live edits into
drift checks within about a second; a Lease elects the one replica that writes, or, with
sharding, each replica holds a Lease of its own and writes for its share of the sources.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from prometheus_client import CollectorRegistry

from gitopsd import configfile, sandbox
from gitopsd.cluster import Cluster
from gitopsd.cluster.watches import Watches
from gitopsd.config import Network
from gitopsd.configfile import DaemonConfig, SourceConfig
from gitopsd.daemon import disk, http, logs, servers, status_page
from gitopsd.daemon.clock import Clock
from gitopsd.daemon.clusters import Clusters
from gitopsd.daemon.control import Control
from gitopsd.daemon.controller import GitSyncController
from gitopsd.daemon.file_sources import FileSources
from gitopsd.daemon.forwarding import Forwarder
from gitopsd.daemon.gitsyncsets import GitSyncSetController
from gitopsd.daemon.networks import learning
from gitopsd.daemon.notifier import Notifier, Settings
from gitopsd.daemon.queue import Pool
from gitopsd.daemon.quotas import Holdings
from gitopsd.daemon.registry import Registry
from gitopsd.daemon.set_reads import GitReads
from gitopsd.daemon.worker import SourceWorker
from gitopsd.daemon.writers import Shares, Writers
from gitopsd.errors import ConfigError, ConfigReason, GitopsdError
from gitopsd.metrics import Recorder
from gitopsd.reconcile import desired

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
        self.registry = CollectorRegistry()
        self.recorder = Recorder(self.registry, config.object_series_budget)
        self.cluster = Cluster.connect(
            config.kubeconfig,
            config.context,
            config.allow_exec_credentials,
            insecure=config.insecure_skip_tls_verify,
            may_write=self._may_write,
            stopping=self.stopping.is_set,
        )
        self.writers = Writers(config, self.cluster, self._leadership, self._shares_changed)
        if not config.leader_election.enabled:
            self.recorder.set_leader(not config.sharding.enabled)
        self.forwarder = Forwarder()
        self.fetches = disk.fetch_ledger(config)
        self.charts = disk.chart_cache(config)
        self.watches = Watches(self.stopping)
        self.recorder.count_watch_events(self.watches.events.snapshot)
        threads = config.concurrent_reconciles
        most = STALLED_THREADS * threads
        share = config.tenant_quota.threads
        self.clock = Clock()
        stalls = self.clock.timers("pool")
        self.pool = Pool(threads, "reconcile", STALLED_POLL_SECONDS, most, stalls, share)
        self.scheduled = threading.Event()
        """Set once the sources are scheduled: the endpoints serve before, and until then
        no worker exists whose readiness could be asked."""
        self.sources = Registry(elsewhere=self._not_running_here)
        self.tenants_network = self._tenants_network()
        fenced = not config.git_syncs.allow_insecure  # a GitSync's kubeconfig, as its fetches
        self.clusters = Clusters(self.cluster, config.clusters, fenced, self.tenants_network)
        self.recorder.count_api_requests(self.clusters.requests)
        self.recorder.watch_clusters(self.clusters.reachable)
        self.notifier = self._notifier()
        self.controller = self._controller(sources)
        self.sets = self._sets()
        self.file_sources = FileSources(
            configs=sources,
            worker_of=self._worker,
            registry=self.sources,
            clock=self.clock,
            recorder=self.recorder,
            cluster=self.writers.cluster_for(""),
            control_namespace=config.control_namespace,
            stopping=self.stopping,
        )

    def _controller(self, sources: list[SourceConfig]) -> GitSyncController | None:
        """Operator mode, if enabled: GitSyncs beside the file sources. Their polls run in
        the daemon's pool, as the file sources' do."""
        if not self.config.git_syncs.enabled:
            return None
        parents = frozenset((s.settings.name, s.settings.inventory_namespace) for s in sources)
        settings = self.config.git_syncs
        return GitSyncController(
            settings=replace(settings, network=self.tenants_network),  # fenced for tenants
            cluster=self.cluster,
            recorder=self.recorder,
            cache_dir=self.config.cache_dir,
            writers=self.writers,
            stopping=self.stopping,
            clock=self.clock,
            sources=self.sources,
            pool=self.pool,
            fetches=self.fetches,
            charts=self.charts,
            watches=self.watches,
            notifier=self.notifier,
            clusters=self.clusters,
            taken_parents=parents,
            holdings=Holdings(self.config.tenant_quota),
        )

    def _sets(self) -> GitSyncSetController | None:
        """GitSyncSets, if served (gitSyncs.sets): the GitSyncs they generate are seen
        through the GitSync controller's informers."""
        if self.controller is None or not self.config.git_syncs.sets:
            return None
        settings = self.controller.settings
        reads = GitReads(self.cluster, settings, self.config.cache_dir, self.fetches)
        return GitSyncSetController(
            settings, self.cluster, self.writers, self.stopping, self.clock, self.pool,
            self.controller.gitsyncs, reads, self.config.tenant_quota,
        )  # fmt: skip

    def _notifier(self) -> Notifier:
        """The daemon's providers and the GitSyncs', sent to on threads of their own; a
        GitSync's fenced as its fetches are, unless insecure GitSyncs are allowed."""
        settings, network = self.config.notifications, self.tenants_network
        fenced = not self.config.git_syncs.allow_insecure
        page = self.config.status_page.url  # commit statuses and messages link to it
        told = Settings(
            settings.providers, page, settings.attempts, settings.resend_seconds, fenced, network
        )
        return Notifier(told, self.recorder, self.clock.timers("notifications"))

    def _tenants_network(self) -> Network:
        """What the GitSyncs' fetches and providers may reach: the cluster's networks are
        learned (and fenced) only where GitSyncs are served."""
        network = self.config.git_syncs.network
        if not self.config.git_syncs.enabled:
            return network
        return learning(network, self.cluster, self.stopping)

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

    def _shares_changed(self, shares: Shares) -> None:
        """The replicas, or whether this one may write, changed: each source's gate follows
        its tenant's share; GitSyncs no longer in it retire, those new to it start."""
        self.recorder.set_leader(shares.writing)
        self.recorder.set_shard_members(shares.members)
        for worker in self.sources.workers():
            worker.lead(self.writers.may_write(worker.tenant))
        if self.writers.serves(""):
            self.file_sources.run()
        else:
            self.file_sources.retire()
        if self.controller and shares.began:
            self.controller.requeue_all()  # its finalizers and statuses, as a new leader's
        elif self.controller:
            self.controller.reshard()
        if self.sets:
            self.sets.requeue_all()

    def _not_running_here(self, name: str) -> str:
        """Why source `name`, which does not run here, is not ready: with sharding, a
        GitSync may be another replica's (its status says); its dependents see a change at
        their next poll, not at once as they do when it runs here."""
        if self.controller and self.writers.sharded:
            return self.controller.unready_elsewhere(name)
        return "it is not running"

    def _may_write(self) -> bool:
        """Fencing, checked before every write: none without the lease; once shutting down,
        none but a source's record of what it applied (Cluster.stopping)."""
        return self.writers.leads()

    def _leadership(self, leading: bool) -> None:
        self.recorder.set_leader(leading)
        if leading:
            self.file_sources.maps.forget_all()  # statuses are written afresh
            for worker in self.sources.workers():
                worker.forget_applied()
                worker.poll_soon()
            if self.controller:
                self.controller.requeue_all()
            if self.sets:
                self.sets.requeue_all()

    def _worker(self, source: SourceConfig, on_report: Callable[[], None]) -> SourceWorker:
        return SourceWorker(
            config=source,
            cluster=self.clusters.of_source(source, self.writers.cluster_for("")),
            recorder=self.recorder,
            cache_dir=self.config.cache_dir / "sources",
            leading=self.writers.gate_for(""),
            stopping=self.stopping,
            pool=self.pool,
            fetches=self.fetches,
            charts=self.charts,
            watches=self.watches,
            on_report=on_report,
            dependencies_waiting=self.sources.dependencies_of(source),
            tell=self.notifier.teller(source.name, self.writers.gate_for("").is_set),
        )

    def ready(self) -> bool:
        """Sources scheduled, leadership known, the API server reachable, every source of
        this cluster tried and its watch caches synced (another cluster's outage is its
        sources' own), and the pool of polls not stuck: false during an outage, or while
        polls wait and none started or ended for poolProgressDeadline (every thread held),
        true again once the caches caught up and the pool moves."""
        if not self.scheduled.is_set():
            return False
        known = self.writers.state_known()
        reachable = self.cluster.api.reachable
        serving = self.controller is None or self.controller.ready()
        serving = serving and (self.sets is None or self.sets.ready())
        home = [w for w in self.file_sources.running_workers() if not w.config.cluster]
        workers = all(worker.ready() for worker in home)
        moving = self.pool.stuck_seconds() < self.config.pool_progress_seconds
        return known and reachable and serving and workers and moving

    def run(self) -> int:
        for name, error in self.set_aside:
            self.recorder.error(name, ConfigError.stage, ConfigReason.INVALID)
            log.error("set aside: %s", error, extra={"source": name})
        servers = self._serve()
        self.file_sources.maps.start()  # the suspensions, read before the sources start
        self.writers.start()
        if self.writers.sharded:
            self.forwarder.start()
        self._schedule()
        self.notifier.start()
        if self.controller:
            self.controller.start()
        if self.sets:
            self.sets.start()
        self._wait_for_a_signal()
        self._shut_down()
        for server in servers:
            server.shutdown()
        return 0

    def _serve(self) -> list[http.Server]:
        files = self.file_sources
        clusters = {source.name: source.cluster_name for source in self.config.sources}
        control = Control(self.sources.workers, lambda: list(self.set_aside), files, clusters)
        probes = http.Probes(self.registry, self.ready)
        page = status_page.serving(self.config.status_page, control)
        return servers.start(self.config, http.Webhooks(self._webhooks()), probes, control, page)

    def _schedule(self) -> None:
        """The configuration's sources start now; with sharding, once the share holds them."""
        if not self.writers.sharded:
            self.file_sources.run()
        self.clock.start()
        self.scheduled.set()

    def _forward(self, path: str) -> http.Forward | None:
        """With sharding, a call for a GitSync of another replica's share is forwarded to
        that replica, if its Lease says where it serves webhooks."""
        controller = self.controller
        gitsync = controller.served_elsewhere(path) if controller else None
        address = self.writers.address_of_owner(gitsync.namespace) if gitsync else ""
        if gitsync is None or not address:
            return None
        where = f"gitsyncs/{gitsync.namespace}/{gitsync.name}"
        return http.Forward(partial(self.forwarder.send, address, where))

    def _webhooks(self) -> Callable[[str], http.Webhook | http.Forward | None]:
        """The webhooks by path: a file source's at its name, a GitSync's at
        gitsyncs/NAMESPACE/NAME (only those running here)."""
        controller = self.controller

        def webhook_of(path: str) -> http.Webhook | http.Forward | None:
            if path.startswith("gitsyncs/"):
                found = controller.webhook_of(path) if controller else None
                return found or self._forward(path)
            worker = self.file_sources.worker(path)
            if worker is None or worker.config.webhook_secret is None:
                return None
            return http.Webhook(worker.config.webhook_secret, worker.announced)

        return webhook_of

    def stop(self, *_: object) -> None:
        self.stopping.set()

    def _wait_for_a_signal(self) -> None:
        """Python runs a signal's handler only in the main thread, between bytecodes, so
        the main thread waits in short steps rather than in one wait that nothing but the
        signal could end (a replica once outlived SIGTERM by a minute, cause unknown)."""
        while not self.stopping.wait(timeout=1.0):
            continue

    def _shut_down(self) -> None:
        """No new work (writes are fenced from now on, all but a source's record of what it
        applied), the reconcile in flight ends at its next write or on its own within the
        grace period, then the lease is given up."""
        log.info("shutting down")
        self.clock.stop()
        self.notifier.stop()
        if self.controller:
            self.controller.stop()
        if self.sets:
            self.sets.stop()
        sandbox.stop_waiting_for_rules()
        deadline = time.monotonic() + self.config.shutdown_grace_seconds
        if self.fetches.git:
            self.fetches.git.keep()  # the next process reads them again
        self.charts.keep()
        for worker in self.sources.workers():
            worker.stop(grace_seconds=max(deadline - time.monotonic(), 0))
        self.forwarder.stop()
        self.writers.release()
        log.info("stopped")


def run(config_path: Path, level: str = "info", form: str | None = None) -> int:
    """The daemon, logging lines of `level` and above as `form` (json, text; None: text on
    a terminal, else json), the error that stops it too: its log says why it ended."""
    logs.configure(sys.stderr, logging.getLevelNamesMapping()[level.upper()], form)
    signal.signal(signal.SIGUSR1, logs.log_every_threads_stack)
    try:
        return _run(config_path)
    except GitopsdError as error:
        log.error("%s", error, extra={"stage": error.stage, "reason": error.reason})
        return error.exit_code


def _run(config_path: Path) -> int:
    config = configfile.load(config_path)
    rule_share = config.tenant_quota.health_rule_seconds_per_minute
    sandbox.bound_everything(config.sandbox, rule_share)  # the tenants' rules and renders
    daemon = Daemon(config)
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    return daemon.run()
