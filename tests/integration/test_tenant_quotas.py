"""Each tenant's share of the daemon (TA-03): a 200-byte chart renders thousands of
ConfigMaps under every per-revision limit, and in observe mode nothing is written, so no
quota of the API server counts them. The daemon counts them itself, per namespace
(tenantQuota): a revision that would take its namespace past its share of objects, and a
GitSync past its share of GitSyncs, are refused with QuotaExceeded, naming the bound,
while the daemon lives in the Deployment's 1 GiB and another tenant is still healed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import create_namespace
from tests.harness.waiting import wait_for
from tests.integration.test_gitsync import (
    condition,
    config_map,
    config_map_value,
    create,
    get,
    wait_ready,
)

BOMB_CHART = {
    "bomb/Chart.yaml": "apiVersion: v2\nname: bomb\nversion: 0.1.0\n",
    "bomb/templates/many.yaml": (
        "{{- range until (int .Values.count) }}\n---\napiVersion: v1\nkind: ConfigMap\n"
        "metadata:\n  name: m-{{ . }}\n{{- end }}\n"
    ),
}
RENDERED = 2_000
"""ConfigMaps each of the tenant's GitSyncs renders."""
QUOTA = {"objects": 5_000, "gitSyncs": 3}
"""The tenant's share in this test: two GitSyncs' revisions fit, a third's does not."""
MEMORY_LIMIT_MIB = 1024
"""The shipped Deployment's memory limit."""


def bomb(git_server: GitServer, git_repo: GitRepo) -> dict[str, Any]:
    """A GitSync's spec: the chart in observe mode, rendering RENDERED ConfigMaps."""
    return {
        "repository": {"url": git_server.file_url(git_repo)},
        "paths": ["bomb"],
        "mode": "observe",
        "helm": {"values": {"count": RENDERED}},
    }


def holding(api: Any, namespace: str, name: str) -> Callable[[], bool]:
    """Whether GitSync `name` read its revision: its status counts the objects it holds."""

    def read() -> bool:
        status = (get(api, namespace, name) or {}).get("status") or {}
        return (status.get("inventory") or {}).get("total") == RENDERED

    return read


def refused(api: Any, namespace: str, name: str, bound: str) -> dict[str, Any] | None:
    """GitSync `name`'s Ready condition, once it says QuotaExceeded naming `bound`."""
    ready = condition(get(api, namespace, name), "Ready")
    met = ready.get("reason") == "QuotaExceeded" and bound in ready.get("message", "")
    return ready if met else None


def test_ta03_a_tenant_at_its_share_is_refused_and_another_tenant_is_still_healed(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    record_property: Callable[[str, object], None],
) -> None:
    attacker, neighbour = namespace, create_namespace(admin_api, "neighbour")
    git_repo.commit({**BOMB_CHART, "plain/c.yaml": config_map("c")})
    settings = {"enabled": True, "namespaces": [attacker, neighbour], "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, tenantQuota=QUOTA)
    daemon.memory_limit_mib = MEMORY_LIMIT_MIB
    daemon.start()
    plain = {"repository": {"url": git_server.file_url(git_repo)}, "paths": ["plain"]}
    create(admin_api, neighbour, "plain", plain)
    wait_ready(admin_api, neighbour, "plain", "True", "Succeeded")

    for name in ("bomb-1", "bomb-2"):  # 4,000 objects held: within the share of 5,000
        create(admin_api, attacker, name, bomb(git_server, git_repo))
        wait_for(holding(admin_api, attacker, name), f"{name} to hold its revision", 120)
    create(admin_api, attacker, "bomb-3", bomb(git_server, git_repo))
    over_objects = wait_for(
        lambda: refused(admin_api, attacker, "bomb-3", "tenantQuota.objects"),
        "the third revision refused",
        120,
    )
    create(admin_api, attacker, "bomb-4", bomb(git_server, git_repo))
    over_git_syncs = wait_for(
        lambda: refused(admin_api, attacker, "bomb-4", "tenantQuota.gitSyncs"),
        "the fourth GitSync refused",
        120,
    )

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("c", neighbour, {"data": {"value": "edited"}})
    edited = time.monotonic()
    wait_for(lambda: config_map_value(admin_api, neighbour, "c") == "one", "the heal", 60)
    record_property("neighbour_heal_seconds", round(time.monotonic() - edited, 2))
    assert daemon.cage is not None
    record_property("daemon_peak_mib", daemon.cage.peak_mib())
    record_property("cage", daemon.cage.kind)

    assert f"namespace {attacker} may hold 5,000 objects" in over_objects["message"]
    assert "this revision of" in over_objects["message"]
    assert f"namespace {attacker} may have 3 GitSyncs served" in over_git_syncs["message"]
    assert holding(admin_api, attacker, "bomb-1")() and holding(admin_api, attacker, "bomb-2")()
    assert daemon.process is not None and daemon.process.poll() is None
    assert daemon.cage.oom_kills() == 0
