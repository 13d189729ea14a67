"""gitopsd's cluster client against the real API server: requests go out at once over
connections it keeps."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gitopsd.cluster import Cluster, Resource
from gitopsd.config import SyncSettings
from gitopsd.objects import Body
from tests.harness.controlplane import ControlPlane
from tests.harness.faultproxy import Fault, FaultProxy, Request

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
IN_FLIGHT = SyncSettings(name="any").concurrency


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    started = FaultProxy(control_plane).start()
    yield started
    started.stop()


def config_map(namespace: str, name: str) -> Body:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"k": "v"},
    }


def dry_run(request: Request) -> bool:
    return request.method == "PATCH" and "dryRun=All" in request.query


def test_requests_go_out_at_once_over_connections_kept_for_the_next_burst(
    proxy: FaultProxy, namespace: str, tmp_path: Path
) -> None:
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    bodies = [config_map(namespace, f"c{number}") for number in range(IN_FLIGHT)]

    def burst() -> None:
        """Dry-runs that the proxy holds until all of them are there."""
        together = threading.Barrier(IN_FLIGHT, timeout=60)
        held = proxy.inject(Fault(dry_run, hold=together, times=IN_FLIGHT))
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            list(
                pool.map(lambda b: cluster.apply(CONFIG_MAPS, b, dry_run=True, force=True), bodies)
            )
        assert held.fired == IN_FLIGHT

    burst()
    opened = proxy.accepted
    burst()

    assert opened >= IN_FLIGHT and proxy.accepted == opened  # every connection was kept
