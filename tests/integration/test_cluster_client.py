"""gitopsd's cluster client against the real API server: requests go out at once over
connections it keeps, and lists come page by page (and start over when their snapshot
expires)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gitopsd.cluster import ApiError, Cluster, Resource
from gitopsd.config import SyncSettings
from gitopsd.objects import Body
from tests.harness.controlplane import ControlPlane
from tests.harness.faultproxy import Answer, Fault, FaultProxy, Request

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
EXPIRED = Answer(
    410,
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired",'
    b'"message":"The provided continue parameter is too old to display a consistent list"}',
)
IN_FLIGHT = SyncSettings(name="any").concurrency


@pytest.fixture
def admin(control_plane: ControlPlane) -> Cluster:
    return Cluster.connect(str(control_plane.kubeconfig))


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


def continued(request: Request) -> bool:
    return request.method == "GET" and "continue=" in request.query


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


def test_a_list_comes_in_pages_of_the_page_size(admin: Cluster, namespace: str) -> None:
    for name in "abcde":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    admin.page_size = 2
    before = admin.api.counters.snapshot().get(("GET", 200), 0)

    listed = admin.list_objects(CONFIG_MAPS, namespace)

    assert sorted(b["metadata"]["name"] for b in listed if b["metadata"]["name"] in "abcde") == [
        *"abcde"
    ]
    pages = admin.api.counters.snapshot()[("GET", 200)] - before
    assert pages == -(-len(listed) // 2)  # every page full but the last


def test_a_list_whose_snapshot_expired_starts_over_and_mixes_no_pages(
    proxy: FaultProxy, namespace: str, tmp_path: Path, admin: Cluster
) -> None:
    for name in "abcde":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    cluster.page_size = 2
    expired = proxy.inject(Fault(continued, EXPIRED, times=1))

    listed = cluster.list_objects(CONFIG_MAPS, namespace, selector="")

    assert expired.fired == 1
    names = [b["metadata"]["name"] for b in listed]
    assert sorted(names) == sorted(set(names)) and {*"abcde"} <= set(names)


def test_a_list_that_keeps_expiring_fails_with_410_after_a_few_restarts(
    proxy: FaultProxy, namespace: str, tmp_path: Path, admin: Cluster
) -> None:
    for name in "abc":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    cluster.page_size = 2
    expired = proxy.inject(Fault(continued, EXPIRED))

    with pytest.raises(ApiError) as failed:
        cluster.list_objects(CONFIG_MAPS, namespace)

    assert failed.value.status == 410 and failed.value.reason == "gone"
    assert expired.fired == 4  # the first list and three restarts
