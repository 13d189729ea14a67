"""The fleet under Flux: the tenants of tests/bench/fleet.py (a namespace each, all of one
repository of ten ConfigMaps and a Service, interval 1m, prune), each a GitRepository and a
Kustomization of it, on a bare control plane of their own, as gitopsd's fleet has: each side
starts from an empty cluster and has the machine to itself. Measured as gitopsd's fleet is,
from outside: from creation until every Kustomization applied the commit, both
controllers' memory and threads together, what one idle interval costs, and a commit until
every tenant applied it, first at their intervals, then announced as a Receiver announces
it: `reconcile.fluxcd.io/requestedAt` set on every GitRepository."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.bench.fleet import INTERVAL_SECONDS, carrying, manifests
from tests.bench.measure import (
    BenchError,
    HighWater,
    process_status,
    seconds_until,
    threads,
)
from tests.bench.peers.flux import (
    SOURCES,
    Flux,
    FluxBinaries,
    applied,
    git_secret,
    revision,
    watched,
)
from tests.harness import audit
from tests.harness.controlplane import PEER_USERS, Binaries, ControlPlane, running_control_plane
from tests.harness.gitserver import GitServer
from tests.harness.kube import api_client

MiB = 2**20


@dataclass
class FluxFleetFigures:
    tenants: int
    all_ready_seconds: float | None = None
    rss_mib: float = 0.0
    """Both controllers' VmRSS together, after the idle window."""
    peak_rss_mib: float = 0.0
    """Both controllers' VmHWM together (each one's peak, whenever it was)."""
    threads: int = 0
    """The most both ran at once, from creating the tenants to the last commit applied."""
    idle_seconds: float = 0.0
    idle_cpu_seconds: float = 0.0
    idle_requests: int = 0
    idle_kinds: Counter[str] = field(default_factory=Counter)
    polled_commit_seconds: float | None = None
    """From a commit to every tenant carrying it, at their intervals (None: not within)."""
    announced_commit_seconds: float | None = None
    """From a commit, announced to every GitRepository, to every tenant carrying it."""
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    """CPU seconds by step (CREATION, POLLED, ANNOUNCED), then by process."""


CREATION, POLLED, ANNOUNCED = "creation", "a commit, at the interval", "a commit, announced"


def measure_flux_fleet(
    binaries: Binaries, flux: FluxBinaries, workdir: Path, tenants: int
) -> FluxFleetFigures:
    print(f"bench: fleet of {tenants:,} tenants under Flux, work in {workdir}", flush=True)
    workdir.mkdir(parents=True, exist_ok=True)
    with running_control_plane(binaries, workdir / "cluster", with_controllers=False) as plane:
        server = GitServer(root=workdir / "git")
        (workdir / "git").mkdir()
        server.start_apart(workdir / "git-server.log")
        fleet = FluxFleet(plane, server, Flux(plane, flux, binaries.kubectl, workdir / "flux"))
        try:
            return fleet.measure(tenants)
        finally:
            fleet.flux.stop()
            server.stop()


class FluxFleet:
    def __init__(self, plane: ControlPlane, server: GitServer, flux: Flux) -> None:
        self.plane, self.server, self.flux = plane, server, flux
        self.api = api_client(plane)
        self.repo = server.create_repo("fleet")
        self.sha = self.repo.commit(manifests("one"))
        self.count = 0

    def measure(self, tenants: int) -> FluxFleetFigures:
        figures, self.count = FluxFleetFigures(tenants), tenants
        self.install()
        self.flux.start()
        pids = list(self.flux.pids.values())
        peak = HighWater(pids[0], lambda _: sum(threads(pid) for pid in pids))
        cpu = watched(self.plane, self.flux)
        created = time.monotonic()
        url = self.server.http_url(self.repo)
        for number in range(tenants):
            self.flux.create_tenant(f"fleet-{number}", url, f"{INTERVAL_SECONDS}s", targeted=True)
        deadline = 300.0 + 0.5 * tenants
        figures.all_ready_seconds = seconds_until(self.all_applied, created, deadline, 0.5)
        figures.cpu[CREATION] = cpu.lap()
        self.check_applied(figures.all_ready_seconds, deadline)
        self.idle(figures, INTERVAL_SECONDS)
        cpu.lap()
        figures.polled_commit_seconds = self.commit("polled", announce=False)
        figures.cpu[POLLED] = cpu.lap()
        figures.announced_commit_seconds = self.commit("announced", announce=True)
        figures.cpu[ANNOUNCED] = cpu.lap()
        figures.threads = peak.stop()
        show("threads", f"{figures.threads} at most, both together")
        return figures

    def install(self) -> None:
        core: Any = client.CoreV1Api(self.api)
        secret = git_secret(self.server.username, self.server.password)
        for number in range(self.count):
            namespace = f"fleet-{number}"
            core.create_namespace({"metadata": {"name": namespace}})
            core.create_namespaced_secret(namespace, secret)

    def all_applied(self) -> bool:
        return self.applied() == self.count

    def applied(self) -> int:
        at = revision(self.sha)
        return sum(1 for found in self.flux.kustomizations() if applied(found, at))

    def check_applied(self, seconds: float | None, deadline: float) -> None:
        """Flux falling behind is a figure ("never"); Flux applying nothing is a failure."""
        if seconds is not None:
            show("all ready", f"{seconds:.1f} s")
            return
        done = self.applied()
        if not done:
            log = self.flux.log("kustomize-controller")
            raise BenchError(
                f"Flux applied no tenant within {deadline:.0f} s; its log ends:\n{log}"
            )
        show("all ready", f"never: {done:,} of {self.count:,} within {deadline:.0f} s")

    def idle(self, figures: FluxFleetFigures, seconds: float) -> None:
        pids = list(self.flux.pids.values())
        cpu = watched(self.plane, self.flux)
        started = time.time()
        time.sleep(seconds)  # the measurement is this window: nothing else happens in it
        spent = cpu.lap()
        figures.idle_seconds = seconds
        figures.idle_cpu_seconds = sum(spent[name] for name in self.flux.pids)
        logged = [r for user in PEER_USERS for r in audit.requests(self.plane, user, started)]
        figures.idle_requests = len(logged)
        figures.idle_kinds = Counter(
            f"{r.verb} {r.resource}{' (dry-run)' if r.dry_run else ''}" for r in logged
        )
        figures.rss_mib = sum(process_status(pid, "VmRSS") for pid in pids) / MiB
        figures.peak_rss_mib = sum(process_status(pid, "VmHWM") for pid in pids) / MiB
        show(
            f"idle {seconds:.0f} s",
            f"{figures.idle_requests} requests, {figures.idle_cpu_seconds:.2f} s CPU, "
            f"RSS {figures.rss_mib:.0f} MiB (peak {figures.peak_rss_mib:.0f})",
        )

    def commit(self, value: str, announce: bool) -> float | None:
        """A commit until every tenant's ConfigMap carries `value`; `announce`: as a Receiver
        does, every GitRepository asked to reconcile at once (the requests' time counted)."""
        self.repo.commit(manifests(value))
        started = time.monotonic()
        if announce:
            for number in range(self.count):
                self.flux.request(SOURCES, f"fleet-{number}")
        deadline = 2 * INTERVAL_SECONDS + 0.5 * self.count
        carried = seconds_until(
            lambda: carrying(self.api, value) == self.count, started, deadline, 0.5
        )
        how = "announced" if announce else "at their intervals"
        took = "never" if carried is None else f"{carried:.1f} s"
        show(value, f"{took} to all {self.count}, {how}")
        return carried


def show(step: str, text: str) -> None:
    print(f"  flux fleet {step:<11} {text}", flush=True)
