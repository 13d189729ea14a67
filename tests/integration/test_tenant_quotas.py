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

from tests.harness import audit
from tests.harness.cluster_reads import config_map_data_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import GROUP, PLURAL, VERSION, condition, create, get, wait_ready
from tests.harness.kube import create_namespace
from tests.harness.manifests import config_map_with_value
from tests.harness.waiting import wait_for

BOMB_CHART = {
    "bomb/Chart.yaml": "apiVersion: v2\nname: bomb\nversion: 0.1.0\n",
    "bomb/templates/many.yaml": (
        "{{- range until (int .Values.count) }}\n---\napiVersion: v1\nkind: ConfigMap\n"
        "metadata:\n  name: m-{{ . }}\n{{- end }}\n"
    ),
}
RENDERED = 2_000
"""ConfigMaps each of the tenant's GitSyncs renders."""
QUOTA = {"objects": 5_000, "gitSyncs": 3, "requestsPerSecond": 10_000, "requestBurst": 10_000}
"""The tenant's share in this test: two GitSyncs' revisions fit, a third's does not (its
pace of requests is not this test's bound: at the default, observe mode's dry-runs of
4,000 ConfigMaps would take 80 s)."""
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
    git_repo.commit({**BOMB_CHART, "plain/c.yaml": config_map_with_value("c")})
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
    wait_for(lambda: config_map_data_value(admin_api, neighbour, "c") == "one", "the heal", 60)
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


RETRY_SECONDS_BEFORE_DELETION = 16.0
"""How long the waiting GitSync's backoff has grown when the one before it is deleted:
longer than the deadline it is then given, so only a wake-up meets that deadline."""


def retried_after(daemon: DaemonProcess, name: str, seconds: float) -> bool:
    """Whether the daemon logged a retry of GitSync `name` at least `seconds` away."""
    delays = [
        float(line["message"].rsplit("retrying in ", 1)[1].split()[0])
        for line in daemon.log_lines()
        if line.get("source") == name and "; retrying in " in line.get("message", "")
    ]
    return any(delay >= seconds for delay in delays)


def test_ta03_a_gitsync_waiting_for_its_share_is_served_once_another_is_deleted(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit(
        {"first/c.yaml": config_map_with_value("c"), "second/d.yaml": config_map_with_value("d")}
    )
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, tenantQuota={"gitSyncs": 1})
    daemon.start()
    repository = {"url": git_server.file_url(git_repo)}
    create(admin_api, namespace, "first", {"repository": repository, "paths": ["first"]})
    wait_ready(admin_api, namespace, "first", "True", "Succeeded")
    create(admin_api, namespace, "second", {"repository": repository, "paths": ["second"]})
    wait_for(
        lambda: retried_after(daemon, f"{namespace}/second", RETRY_SECONDS_BEFORE_DELETION),
        "the second GitSync's backoff to grow",
        90,
    )

    client.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "first"
    )

    wait_for(
        lambda: (
            condition(get(admin_api, namespace, "second"), "Ready").get("reason") != "QuotaExceeded"
        ),
        "the second GitSync served at once, not at its backoff's end",
        RETRY_SECONDS_BEFORE_DELETION / 2,
    )
    wait_ready(admin_api, namespace, "second", "True", "Succeeded")


PACE = {"requestsPerSecond": 20, "requestBurst": 10}
"""The tenant's share of the API server in this test: a sync of PACED_OBJECTS ConfigMaps
(a dry-run and an apply each) takes seconds at this pace, not a fraction of one."""
PACED_OBJECTS = 60


def test_ta03_a_namespaces_requests_leave_at_its_pace(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    control_plane: ControlPlane,
) -> None:
    git_repo.commit(
        {f"many/c{n}.yaml": config_map_with_value(f"c{n}") for n in range(PACED_OBJECTS)}
    )
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, tenantQuota=PACE)
    daemon.start()
    since = time.time()
    create(admin_api, namespace, "many", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "many", "True", "Succeeded")

    sent = sorted(
        write.received
        for write in audit.writes(control_plane, daemon.user, since)
        if write.namespace == namespace and write.resource == "configmaps"
    )
    assert len(sent) >= 2 * PACED_OBJECTS  # a dry-run and an apply of each
    beyond_burst = len(sent) - PACE["requestBurst"] - 1  # one token of slack in flight
    span = sent[-1] - sent[0]
    assert span >= beyond_burst / PACE["requestsPerSecond"], (len(sent), span)
