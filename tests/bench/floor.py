"""The CPU floor of a fleet: what the API requests it needed cost at the least, on this
machine, in this run. Calibrated by sending a known number of server-side applies of a
ConfigMap (as the fleet's requests mostly are: half dry-runs, half creates) through
gitopsd's own client, and reading the CPU seconds kube-apiserver, etcd and the client spent
on them; the floor of a window is its requests times that, over the machine's cores."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from gitopsd.cluster import Cluster, run_concurrently
from gitopsd.resources import CONFIG_MAPS
from tests.bench.measure import cpu_seconds
from tests.harness.controlplane import ControlPlane

CALIBRATION_REQUESTS = 2000
IN_FLIGHT = 8
"""As the daemon's pool of reconciles (concurrentReconciles)."""
CLIENT = "client"


@dataclass(frozen=True)
class Processes:
    """The processes whose CPU a window is charged: each daemon's, the API server's, etcd's."""

    pids: Mapping[str, list[int]]

    @classmethod
    def of(cls, plane: ControlPlane, daemons: list[int]) -> Processes:
        assert plane.apiserver is not None and plane.etcd is not None  # started
        return cls(
            {"gitopsd": daemons, "kube-apiserver": [plane.apiserver.pid], "etcd": [plane.etcd.pid]}
        )

    def cpu(self) -> dict[str, float]:
        """CPU seconds each has used so far (all of a name's processes together)."""
        return {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in self.pids.items()}


def machine_cpu() -> float:
    """CPU seconds every process of the machine has used so far, all cores together."""
    fields = [int(n) for n in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Window:
    """What one step of the fleet cost: CPU seconds per process, and the API requests the
    daemon sent."""

    seconds: float
    cpu: dict[str, float]
    requests: int
    machine: float = 0.0
    """CPU seconds the whole machine used meanwhile (those processes, and every other)."""

    def busy(self) -> float:
        """The share of the machine's cores in use over the window."""
        return self.machine / (self.seconds * (os.cpu_count() or 1))

    def floor(self, per_request: float) -> float:
        """Seconds the requests needed at the least: their CPU over every core."""
        return self.requests * per_request / (os.cpu_count() or 1)


def spent(processes: Processes, step: Callable[[], int]) -> Window:
    """Runs `step` (which returns the requests it made) and charges it its CPU."""
    before, machine, started = processes.cpu(), machine_cpu(), time.monotonic()
    requests = step()
    after = processes.cpu()
    cpu = {name: after[name] - before[name] for name in after}
    return Window(time.monotonic() - started, cpu, requests, machine_cpu() - machine)


@dataclass(frozen=True)
class Calibration:
    requests: int
    cpu: dict[str, float]
    """CPU seconds per request, by process: kube-apiserver, etcd, the client."""

    @property
    def per_request(self) -> float:
        return sum(self.cpu.values())


def calibrate(plane: ControlPlane, namespace: str) -> Calibration:
    """CALIBRATION_REQUESTS server-side applies of small ConfigMaps into `namespace` (which
    must exist), IN_FLIGHT at a time, as the admin user (so the daemon's audited requests
    are not mixed with them): each ConfigMap dry-run, then created."""
    cluster = Cluster.connect(str(plane.kubeconfig), connections=IN_FLIGHT)
    bodies = [_config_map(namespace, number) for number in range(CALIBRATION_REQUESTS // 2)]
    server = Processes.of(plane, [])
    before, client = server.cpu(), time.process_time()
    for dry_run in (True, False):  # a failure raises: no figure from a broken calibration
        run_concurrently(bodies, partial(_apply, cluster, dry_run), IN_FLIGHT)
    after = server.cpu()
    spent_cpu = {name: after[name] - before[name] for name in ("kube-apiserver", "etcd")}
    spent_cpu[CLIENT] = time.process_time() - client
    sent = 2 * len(bodies)
    return Calibration(sent, {name: seconds / sent for name, seconds in spent_cpu.items()})


def _apply(cluster: Cluster, dry_run: bool, body: dict[str, object]) -> object:
    return cluster.apply(CONFIG_MAPS, body, dry_run=dry_run, force=True)


def _config_map(namespace: str, number: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"calibration-{number}", "namespace": namespace},
        "data": {"value": "same"},
    }


def per_request(window: Window, calibration: Calibration) -> str:
    """CPU milliseconds per request the daemon sent in the window, by process, each beside
    what a calibrated apply cost it (gitopsd's beside the client's)."""
    calibrated = {**calibration.cpu, "gitopsd": calibration.cpu.get(CLIENT, 0.0)}
    return ", ".join(
        f"{name} {1000 * cpu / window.requests:.2f} ms ({1000 * calibrated.get(name, 0.0):.2f})"
        for name, cpu in window.cpu.items()
    )


def machine_use(window: Window) -> str:
    """How busy the machine was over the window, and how much of it the measured processes
    were: near 100 %, the step is bound by CPU, and its distance to the floor is CPU spent
    beyond what the requests cost when calibrated."""
    measured = sum(window.cpu.values())
    return (
        f"{100 * window.busy():.0f} % of {os.cpu_count() or 1} cores: {window.machine:.1f} s CPU, "
        f"{measured:.1f} s of it {', '.join(window.cpu)}"
    )


def per_unit(window: Window, units: int) -> str:
    """CPU milliseconds per unit (a GitSync created, one applying a commit), by process."""
    return ", ".join(f"{name} {1000 * cpu / units:.1f} ms" for name, cpu in window.cpu.items())
