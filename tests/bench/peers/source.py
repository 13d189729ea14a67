"""One source under Flux, of the benchmark's largest size, on the bare control plane that
measured gitopsd's daemon on it: the same generated repository (tests/bench/repository.py),
read over smart HTTP, as one GitRepository and one Kustomization (no targetNamespace: the
manifests name theirs). Their intervals are an hour, so that only what is measured asks
Flux to work: each step sets `reconcile.fluxcd.io/requestedAt`, as `flux reconcile` does,
and is timed until Flux's status says it is done.

Steps: the cold apply, until the Kustomization applied the commit; a no-op pass (what
Flux does at each interval: build and dry-run every object); an out-of-band edit of one
ConfigMap, corrected by a pass asked for at once (unasked, Flux corrects at its next
interval); a one-file commit, the GitRepository asked to fetch, until the Kustomization
applied it and the ConfigMap carries it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from tests.bench.lab import Lab
from tests.bench.measure import BenchError, process_status, requests, seconds_until
from tests.bench.peers.flux import (
    KUSTOMIZATIONS,
    SOURCES,
    Flux,
    FluxBinaries,
    applied,
    git_secret,
    handled,
    revision,
    watched,
)
from tests.bench.repository import SEED, ObjectSet, generate, git_repository
from tests.harness.controlplane import PEER_USERS
from tests.harness.gitserver import GitRepo
from tests.harness.kube import api_client

INTERVAL = "1h"
STEPS = COLD, NOOP, HEAL, COMMIT = (
    "cold apply",
    "a no-op pass",
    "an edit, corrected",
    "a one-file commit",
)


@dataclass
class Step:
    seconds: float
    requests: int
    cpu: dict[str, float]
    """CPU seconds by process: Flux's two controllers, kube-apiserver and etcd."""


@dataclass
class FluxSourceFigures:
    size: int
    steps: dict[str, Step] = field(default_factory=dict)
    """By name (STEPS)."""
    rss: int = 0
    """Bytes: both controllers' VmRSS together once every step is done."""
    peak_rss: int = 0
    """Bytes: both controllers' VmHWM together."""


def measure_flux_source(lab: Lab, flux: FluxBinaries, size: int, tag: str) -> FluxSourceFigures:
    print(f"bench: {size:,} objects under Flux, one source", flush=True)
    objects = generate(f"{tag}-f", size)
    lab.server.start_apart(lab.workdir / f"git-server-{tag}.log")
    running = Flux(lab.plane, flux, lab.binaries.kubectl, lab.workdir / f"flux-{tag}")
    try:
        running.start()
        return Source(lab, running, objects, git_repository(lab.server, objects)).measure()
    finally:
        running.stop()
        lab.server.stop()


class Source:
    def __init__(self, lab: Lab, flux: Flux, objects: ObjectSet, repo: GitRepo) -> None:
        self.lab, self.flux, self.objects, self.repo = lab, flux, objects, repo
        self.namespace = f"flux-{objects.tag}"
        self.core: Any = client.CoreV1Api(api_client(lab.plane))
        self.deadline = 300.0 + 0.1 * objects.size

    def measure(self) -> FluxSourceFigures:
        figures = FluxSourceFigures(self.objects.size)
        self.core.create_namespace({"metadata": {"name": self.namespace}})
        secret = git_secret(self.lab.server.username, self.lab.server.password)
        self.core.create_namespaced_secret(self.namespace, secret)
        figures.steps[COLD] = self.timed(COLD, self.cold)
        figures.steps[NOOP] = self.timed(NOOP, self.noop)
        figures.steps[HEAL] = self.timed(HEAL, self.heal)
        figures.steps[COMMIT] = self.timed(COMMIT, self.commit)
        pids = self.flux.pids.values()
        figures.rss = sum(process_status(pid, "VmRSS") for pid in pids)
        figures.peak_rss = sum(process_status(pid, "VmHWM") for pid in pids)
        return figures

    def timed(self, name: str, step: Callable[[], None]) -> Step:
        """Runs `step`, which returns once Flux is done; its time, requests and CPU."""
        cpu = watched(self.lab.plane, self.flux)
        since, started = time.time(), time.monotonic()
        step()
        seconds, until = time.monotonic() - started, time.time()
        asked = sum(requests(self.lab.plane, user, since, until) for user in PEER_USERS)
        spent = cpu.lap()
        show(name, f"{seconds:.2f} s, {asked:,} requests, {sum(spent.values()):.1f} s CPU")
        return Step(seconds, asked, spent)

    def cold(self) -> None:
        url = self.lab.server.http_url(self.repo)
        self.flux.create_tenant(self.namespace, url, INTERVAL, targeted=False)
        self.until("the cold apply", lambda k: applied(k, revision(self.repo.head())))

    def noop(self) -> None:
        stamp = self.flux.request(KUSTOMIZATIONS, self.namespace)
        self.until("a no-op pass", lambda k: handled(k, stamp))

    def heal(self) -> None:
        namespace, name = self.objects.app(0)
        patch = {"data": {"mode": "edited"}}
        self.core.patch_namespaced_config_map(name, namespace, patch)
        stamp = self.flux.request(KUSTOMIZATIONS, self.namespace)
        self.until("the corrective pass", lambda k: handled(k, stamp))
        if self.live(namespace, name, "mode") != SEED:
            raise BenchError(f"Flux's pass left {namespace}/{name} as edited")

    def commit(self) -> None:
        index = self.objects.apps - 1
        namespace, name = self.objects.app(index)
        files = {self.objects.app_file(index): self.objects.app_manifests(index, "flux")}
        at = revision(self.repo.commit(files))
        self.flux.request(SOURCES, self.namespace)
        self.until("the commit applied", lambda k: applied(k, at))
        if self.live(namespace, name, "rev") != "flux":
            raise BenchError(f"Flux applied the commit, yet {namespace}/{name} lacks it")

    def until(self, what: str, done: Callable[[dict[str, Any]], bool]) -> None:
        def holds() -> bool:
            return done(self.flux.kustomization(self.namespace))

        if seconds_until(holds, time.monotonic(), self.deadline, 0.1) is None:
            log = self.flux.log("kustomize-controller")
            raise BenchError(f"Flux: {what} not within {self.deadline:.0f} s; its log ends:\n{log}")

    def live(self, namespace: str, name: str, key: str) -> str | None:
        answer = self.core.read_namespaced_config_map(name, namespace, _preload_content=False)
        value: str | None = (json.loads(answer.data).get("data") or {}).get(key)
        return value


def show(step: str, text: str) -> None:
    print(f"  flux {step:<19} {text}", flush=True)
