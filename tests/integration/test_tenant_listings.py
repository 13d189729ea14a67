"""TA-02: a chart listing a tenant points the daemon at (a registry's tags, a chart
repository's index.yaml reached only through a Chart.yaml dependency in its git repository)
costs the daemon a bounded amount of memory, whatever the listing weighs or holds. The
daemon runs inside a memory limit like the Deployment's: it lives, the attacker's GitSyncs
fail naming the bound, and another tenant's drift is still healed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.chartrepo import ChartRepository, serving
from tests.harness.cluster_reads import config_map_data_value
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitServer
from tests.harness.gitsyncs import condition, create, get, wait_ready
from tests.harness.kube import create_namespace
from tests.harness.manifests import config_map_with_value
from tests.harness.registry import FloodingRegistry, serving_flooding_registry
from tests.harness.waiting import wait_for

MEMORY_LIMIT_MIB = 1024
"""The shipped Deployment's memory limit."""


@pytest.fixture
def flooding_registries() -> Iterator[tuple[FloodingRegistry, FloodingRegistry]]:
    """Pages of 60 MiB (over the byte bound), and pages of 4 MiB (within it, but a
    million tags each)."""
    with serving_flooding_registry(page_mib=60) as heavy, serving_flooding_registry(4) as many:
        yield heavy, many


@pytest.fixture
def flooded_charts(tmp_path: Path) -> Iterator[ChartRepository]:
    with serving(tmp_path / "flooded-charts", anonymous=True) as repository:
        yield repository


def alive(daemon: DaemonProcess) -> None:
    """Fails at once when the daemon died (the kernel's OOM killer, most likely)."""
    assert daemon.process is not None and daemon.process.poll() is None, (
        f"the daemon died ({daemon.cage.oom_kills() if daemon.cage else 0} OOM kills)"
    )


def failure(
    api: Any, daemon: DaemonProcess, namespace: str, name: str, bound: str
) -> dict[str, Any] | None:
    """The GitSync's Ready condition once it is False naming `bound`."""
    alive(daemon)
    ready = condition(get(api, namespace, name), "Ready")
    return ready if ready.get("status") == "False" and bound in ready.get("message", "") else None


def dependency_on(charts: ChartRepository) -> dict[str, str]:
    """A chart in git whose only dependency is `hello` of `charts`."""
    return {
        "shop/Chart.yaml": (
            "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n"
            f"- name: hello\n  version: '*'\n  repository: {charts.url}\n"
        )
    }


def test_ta02_listings_of_any_weight_cost_a_bounded_memory_and_fail_naming_the_bound(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    flooding_registries: tuple[FloodingRegistry, FloodingRegistry],
    flooded_charts: ChartRepository,
) -> None:
    """TA-02: 50 pages of 60 MiB of tags, pages of 4 MiB of a million tags, and a 60 MiB
    index.yaml reached through a dependency, against a daemon in a 1 GiB memory cgroup."""
    attacker = create_namespace(admin_api, "attacker")
    settings = {"enabled": True, "namespaces": [namespace, attacker], "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings)
    daemon.memory_limit_mib = MEMORY_LIMIT_MIB
    daemon.start()
    victim = git_server.create_repo("victim")
    victim.commit({"app/c.yaml": config_map_with_value("c")})
    create(admin_api, namespace, "victim", {"repository": {"url": git_server.file_url(victim)}})
    wait_ready(admin_api, namespace, "victim", "True", "Succeeded")

    flooded_charts.flood_index("hello", mib=60)
    shop = git_server.create_repo("shop")
    shop.commit(dependency_on(flooded_charts))
    heavy, many = flooding_registries
    chart = {"chart": "hello"}
    create(admin_api, attacker, "heavy-tags", {"repository": {"url": heavy.url}, "helm": chart})
    create(admin_api, attacker, "many-tags", {"repository": {"url": many.url}, "helm": chart})
    create(admin_api, attacker, "index", {"repository": {"url": git_server.file_url(shop)}})
    bounds = {
        "heavy-tags": "limits.maxListingBytes",
        "many-tags": "limits.maxVersions",
        "index": "limits.maxListingBytes",
    }
    for name, bound in bounds.items():
        wait_for(
            lambda: failure(admin_api, daemon, attacker, name, bound),  # noqa: B023
            f"GitSync {name} failed naming {bound}",
            deadline_seconds=90,
        )

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("c", namespace, {"data": {"value": "edited"}})
    wait_for(lambda: config_map_data_value(admin_api, namespace, "c") == "one", "the victim healed")
    alive(daemon)
    assert daemon.cage is not None and daemon.cage.oom_kills() == 0
