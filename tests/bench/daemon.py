"""The daemon measured: `gitopsd run` keeping a set of its own in enforce mode (selfHeal,
prune, a webhook), polling git only hourly, so that only its watches and the webhook make
it act. Latencies are taken from outside: its /metrics and the live objects."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from gitopsd.cluster.cache import Outcome
from gitopsd.daemon.worker import ANNOUNCE_SECONDS
from tests.bench.lab import Lab
from tests.bench.measure import (
    POLL_SECONDS,
    BenchError,
    cpu_seconds,
    process_status,
    requests,
    seconds_until,
    tail,
    wait_until,
)
from tests.bench.repository import SEED, ObjectSet, generate, git_repository
from tests.harness import audit
from tests.harness.controlplane import AUDITED_USER
from tests.harness.daemon import DaemonProcess
from tests.harness.gitserver import GitRepo
from tests.harness.kube import api_client

CURRENT_DEADLINE_SECONDS = 600.0
"""How long the controllers may take to roll the set out before the daemon is measured idle
anyway: on 2 cores they also roll out the one-shot commands' sets, created before it."""
EDIT_DEADLINE_SECONDS = 30.0
OUTCOMES = tuple(str(outcome) for outcome in Outcome)
QUIET_SECONDS = 2.0
"""The daemon has settled when its own request tally stood still this long."""


@dataclass
class DaemonFigures:
    cold_start_seconds: float
    """From starting the process to the revision applied (its last-success timestamp)."""
    cold_start_requests: int
    """Until it settled: the revision applied and what its own writes set off after."""
    current_seconds: float = 0.0
    """With controllers, from starting the process to every object of the set Current, as
    the daemon assessed it (math.inf: not within CURRENT_DEADLINE_SECONDS; 0: not waited
    for, the bare control plane rolls nothing out)."""
    idle_seconds: float = 0.0
    idle_requests: int = 0
    idle_cpu_seconds: float = 0.0
    rollout_seconds: float = 0.0
    """The window measured from the restart of every Deployment of the set."""
    deployments: int = 0
    rollout_cpu_seconds: float = 0.0
    rollout_requests: int = 0
    rollout_dry_runs: int = 0
    rollout_events: dict[str, float] = field(default_factory=dict)
    """Watch events in that window, by what each came to (gitopsd_watch_events_total)."""
    settled_rss: int = 0
    """Bytes resident right after the cold start settled, as an outside harness sees it."""
    rss: int = 0
    """Bytes resident after the idle period, every object cached."""
    peak_rss: int = 0
    detected: list[float | None] = field(default_factory=list)
    """Seconds from each out-of-band edit to its detection in /metrics (None: never)."""
    healed: list[float | None] = field(default_factory=list)
    applied: list[float | None] = field(default_factory=list)
    """Seconds from each one-file commit pushed to the live object carrying it."""
    commit_requests: list[int] = field(default_factory=list)


def measure_daemon(
    lab: Lab,
    size: int,
    tag: str,
    edits: int,
    commits: int,
    idle_seconds: float,
    rollout: bool = False,
) -> DaemonFigures:
    """The daemon's figures; with `rollout`, last, the window of a rollout of every
    Deployment (only where nothing is measured after it on this control plane: the
    controllers roll 2,500 Deployments out in tens of minutes on 2 cores)."""
    objects = generate(f"{tag}-d", size)
    kept = Kept(lab, objects, git_repository(lab.server, objects))
    try:
        figures = kept.measure(edits, commits, idle_seconds)
        if rollout:
            kept.rollout(figures, idle_seconds)
        return figures
    finally:
        kept.daemon.stop()


class Kept:
    """One set kept by a daemon of its own, which runs as the audited user."""

    def __init__(self, lab: Lab, objects: ObjectSet, repo: GitRepo) -> None:
        self.lab, self.objects, self.repo = lab, objects, repo
        self.name = objects.tag
        # printable: the daemon strips whitespace around a secret file's contents, and random
        # bytes begin or end with a whitespace byte in about 1 run of 20
        self.hook_secret = secrets.token_hex(16).encode()
        secret_file = lab.workdir / f"{self.name}.hook-secret"
        secret_file.write_bytes(self.hook_secret)
        source = {
            "name": self.name,
            "repository": lab.server.file_url(repo),
            "allowInsecure": True,
            "interval": "1h",
            "mode": "enforce",
            "selfHeal": True,
            "prune": True,
            "webhookSecretFile": str(secret_file),
        }
        kubeconfig = lab.plane.audited_kubeconfig
        self.daemon = DaemonProcess.configured(
            lab.workdir, self.name, AUDITED_USER, kubeconfig, [source]
        )
        self.core: Any = client.CoreV1Api(api_client(lab.plane))
        self.poked_at: float | None = None
        """When the webhook was last called (time.monotonic())."""

    def measure(self, edits: int, commits: int, idle_seconds: float) -> DaemonFigures:
        figures = self.cold_start()
        self.idle(figures, idle_seconds)
        for number in range(edits):
            self.edit(figures, number, edits)
        for number in range(1, commits + 1):
            self.commit(figures, number)
        figures.peak_rss = process_status(self.pid, "VmHWM")
        return figures

    @property
    def pid(self) -> int:
        assert self.daemon.process is not None
        return self.daemon.process.pid

    def cold_start(self) -> DaemonFigures:
        started = time.time()
        self.daemon.start()
        deadline = 120.0 + 0.1 * self.objects.size
        wait_until(lambda: self.reconciles() >= 1, "the daemon's first reconcile", deadline)
        applied = self.metric("gitopsd_last_success_timestamp_seconds")
        self.settle(deadline)
        requested = requests(self.lab.plane, AUDITED_USER, started, time.time())
        figures = DaemonFigures(applied - started, requested)
        figures.settled_rss = process_status(self.pid, "VmRSS")
        show(
            "cold start",
            f"{figures.cold_start_seconds:.2f} s, {requested:,} requests, "
            f"RSS {figures.settled_rss / 2**20:.0f} MiB once settled",
        )
        if self.lab.plane.with_controllers:
            figures.current_seconds = self.rolled_out(started, deadline)
        return figures

    def rolled_out(self, started: float, deadline_seconds: float) -> float:
        """Waits for the controllers to roll the set out, and for the status the daemon writes
        as health moves to stand still: the idle window that follows measures a cluster at
        rest, not one the controllers still work on. Seconds from `started` (time.time)."""
        current = seconds_until(
            lambda: self.metric("gitopsd_source_health", status="Current") == 1,
            time.monotonic(),
            CURRENT_DEADLINE_SECONDS,
            step=1.0,
        )
        elapsed = math.inf if current is None else time.time() - started
        self.settle(deadline_seconds)
        shown = f"{elapsed:.1f} s" if current is not None else "never"
        show("rolled out", f"every object Current {shown} after the start")
        return elapsed

    def idle(self, figures: DaemonFigures, seconds: float) -> None:
        started, cpu = time.time(), cpu_seconds(self.pid)
        time.sleep(seconds)  # the measurement is this window: nothing else happens in it
        figures.idle_seconds = seconds
        figures.idle_cpu_seconds = cpu_seconds(self.pid) - cpu
        figures.idle_requests = requests(self.lab.plane, AUDITED_USER, started, time.time())
        figures.rss = process_status(self.pid, "VmRSS")
        show(
            f"idle {seconds:.0f} s",
            f"{figures.idle_requests} requests, {figures.idle_cpu_seconds:.2f} s CPU, "
            f"RSS {figures.rss / 2**20:.0f} MiB",
        )

    def rollout(self, figures: DaemonFigures, seconds: float) -> None:
        """Every Deployment of the set restarted as the admin (`kubectl rollout restart`: an
        annotation of the pod template, a field of another manager), and, where controllers
        run, rolled out: ReplicaSets replaced, Pods created and deleted, status in steps.
        Over `seconds` from the restart: the daemon's CPU, requests and watch events by what
        each came to."""
        events, cpu, started = self.watch_events(), cpu_seconds(self.pid), time.time()
        restarts = [self.restart(namespace) for namespace in self.objects.namespaces]
        time.sleep(seconds)  # the measurement is this window: the restarts take a few seconds
        figures.rollout_seconds, figures.deployments = seconds, self.objects.apps
        figures.rollout_cpu_seconds = cpu_seconds(self.pid) - cpu
        sent = audit.requests(self.lab.plane, AUDITED_USER, started)
        figures.rollout_requests = len(sent)
        figures.rollout_dry_runs = sum(1 for request in sent if request.dry_run)
        now = self.watch_events()
        figures.rollout_events = {o: now.get(o, 0) - events.get(o, 0) for o in OUTCOMES}
        for restart in restarts:
            _, error = restart.communicate()
            if restart.returncode:
                raise BenchError(f"kubectl rollout restart failed: {error.strip()}")
        show(
            f"rollout {seconds:.0f} s",
            f"{sum(figures.rollout_events.values()):,.0f} watch events "
            f"({', '.join(f'{o} {n:,.0f}' for o, n in figures.rollout_events.items())}), "
            f"{figures.rollout_requests} requests ({figures.rollout_dry_runs} dry-runs), "
            f"{figures.rollout_cpu_seconds:.2f} s CPU",
        )

    def restart(self, namespace: str) -> subprocess.Popen[str]:
        kubectl = self.lab.binaries.kubectl
        command = [str(kubectl), "--kubeconfig", str(self.lab.plane.kubeconfig)]
        command += ["rollout", "restart", "deployment", "-n", namespace]
        return subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def watch_events(self) -> dict[str, float]:
        """The daemon's watch events so far, by outcome, all resources together."""
        return {o: self.daemon.value("gitopsd_watch_events_total", outcome=o) for o in OUTCOMES}

    def edit(self, figures: DaemonFigures, number: int, edits: int) -> None:
        """An out-of-band edit of one ConfigMap; times its detection and its heal."""
        namespace, name = self.objects.app(number * self.objects.apps // edits)
        detections = self.detections()
        self.core.patch_namespaced_config_map(name, namespace, {"data": {"mode": f"e{number}"}})
        started = time.monotonic()
        deadline = started + EDIT_DEADLINE_SECONDS
        detected = healed = None
        while (detected is None or healed is None) and time.monotonic() < deadline:
            if detected is None and self.detections() > detections:
                detected = time.monotonic() - started
            if healed is None and self.live_data(namespace, name, "mode") == SEED:
                healed = time.monotonic() - started
            time.sleep(POLL_SECONDS)
        figures.detected.append(detected)
        figures.healed.append(healed)
        show(f"edit {number + 1}", f"detected {seconds(detected)}, healed {seconds(healed)}")
        seconds_until(lambda: self.drifted() == 0, time.monotonic(), EDIT_DEADLINE_SECONDS, 0.1)

    def commit(self, figures: DaemonFigures, number: int) -> None:
        """A commit of one changed file, announced by the webhook; times it to the cluster.
        Announcements within ANNOUNCE_SECONDS of the last are one, fetched when it ends:
        each commit waits that long after the last, as pushes a second or more apart do."""
        if self.poked_at is not None:
            time.sleep(max(0.0, self.poked_at + ANNOUNCE_SECONDS - time.monotonic()))
        index = self.objects.apps - number
        namespace, name = self.objects.app(index)
        revision, reconciles = f"c{number}", self.reconciles()
        self.repo.commit(
            {self.objects.app_file(index): self.objects.app_manifests(index, revision)}
        )
        pushed, started = time.time(), time.monotonic()
        self.poke()

        def carries() -> bool:
            return self.live_data(namespace, name, "rev") == revision

        applied = seconds_until(carries, started, 60.0 + 0.05 * self.objects.size)
        wait_until(lambda: self.reconciles() > reconciles, "the commit's reconcile", 600.0)
        figures.applied.append(applied)
        figures.commit_requests.append(requests(self.lab.plane, AUDITED_USER, pushed, time.time()))
        show(
            f"commit {number}",
            f"applied {seconds(applied)}, {figures.commit_requests[-1]} requests",
        )

    def settle(self, deadline_seconds: float) -> None:
        """Waits until nothing drifts and the daemon's request tally stood still a while."""
        last, since = -1.0, time.monotonic()

        def quiet() -> bool:
            nonlocal last, since
            tally = sum(self.daemon.requests().values())
            if tally != last:
                last, since = tally, time.monotonic()
            return self.drifted() == 0 and time.monotonic() - since >= QUIET_SECONDS

        wait_until(quiet, "the daemon to settle", deadline_seconds, step=0.5)

    def poke(self) -> None:
        self.poked_at = time.monotonic()
        body = b"{}"
        signature = "sha256=" + hmac.new(self.hook_secret, body, hashlib.sha256).hexdigest()
        status = self.daemon.post(f"/hooks/{self.name}", body, {"X-Hub-Signature-256": signature})
        if status != 202:
            raise BenchError(f"the webhook answered {status}; the daemon's log ends:\n{self.log()}")

    def reconciles(self) -> float:
        """Successful reconciles so far; fails at once when one failed."""
        if self.metric("gitopsd_reconcile_total", result="failed"):
            raise BenchError(f"a reconcile failed; the daemon's log ends:\n{self.log()}")
        return self.metric("gitopsd_reconcile_total", result="success")

    def detections(self) -> float:
        return self.metric("gitopsd_drift_detection_seconds_count")

    def drifted(self) -> float:
        return self.metric("gitopsd_drift_objects")

    def metric(self, metric: str, **labels: str) -> float:
        return self.daemon.value(metric, source=self.name, **labels)

    def live_data(self, namespace: str, name: str, key: str) -> str | None:
        answer = self.core.read_namespaced_config_map(name, namespace, _preload_content=False)
        value: str | None = (json.loads(answer.data).get("data") or {}).get(key)
        return value

    def log(self) -> str:
        return tail(self.daemon.log_file)


def seconds(value: float | None) -> str:
    return "never" if value is None else f"{value * 1000:.0f} ms"


def show(step: str, text: str) -> None:
    print(f"  daemon {step:<11} {text}", flush=True)
