"""Ownership holds at the moment of the write, not only when a sync starts (SE-16;
docs/ARCHITECTURE.md, Trust boundaries): an object someone else creates while a sync wave
waits, or while a heal is on its way, is refused by the API server itself, keeps its
content, is never recorded, and so is never pruned. The audit log is the oracle for "never
deleted"."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.commands import CLUSTER_FAILED, scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.faultproxy import Fault, FaultProxy, Request
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.kube import Gate
from tests.harness.manifests import deployment
from tests.harness.operators import operator
from tests.harness.records import PART_OF
from tests.harness.status_writer import meanwhile
from tests.harness.waiting import wait_for

QUOTA = "compute-quota"
MEMBER = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: member\ndata:\n  k: git\n"


def quota_file(pods: str, wave: str) -> dict[str, str | None]:
    return {
        f"{QUOTA}.yaml": f"""apiVersion: v1
kind: ResourceQuota
metadata:
  name: {QUOTA}
  annotations: {{gitopsd.io/sync-wave: "{wave}"}}
spec:
  hard: {{pods: "{pods}"}}
"""
    }


def admin_creates_quota(admin_api: Any, namespace: str) -> None:
    body = {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": "7"}}}
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_resource_quota(namespace, body)


def assert_quota_is_the_admins(admin_api: Any, namespace: str) -> None:
    """Its content, labels and field managers are as the admin left them."""
    live: Any = client.CoreV1Api(admin_api).read_namespaced_resource_quota(QUOTA, namespace)
    assert live.spec.hard == {"pods": "7"}
    assert PART_OF not in (live.metadata.labels or {})
    assert "gitopsd" not in {entry.manager for entry in live.metadata.managed_fields or []}


def deleted_quotas(plane: ControlPlane, namespace: str, since: float) -> list[audit.Write]:
    """Every DELETE of a quota in `namespace` the server received since `since`, by anyone."""
    return [
        w
        for w in audit.writes_by_anyone(plane, since)
        if w.verb == "delete" and w.resource == "resourcequotas" and w.namespace == namespace
    ]


def web_exists(api: Any, namespace: str) -> bool:
    found: Any = client.AppsV1Api(api).list_namespaced_deployment(namespace)
    return any(item.metadata.name == "web" for item in found.items)


@pytest.mark.case("SE-16")
def test_se16_an_object_created_meanwhile_while_a_wave_waits_is_never_taken_by_a_sync(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    git_repo.commit({**deployment("web", pods_on=gate.node_selector), **quota_file("3", wave="1")})
    url = git_server.file_url(git_repo)

    def admin_creates_it_while_wave_0_waits() -> None:
        wait_for(lambda: web_exists(admin_api, namespace), "web", 120)
        admin_creates_quota(admin_api, namespace)
        gate.open()

    with meanwhile(admin_creates_it_while_wave_0_waits):
        run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == CLUSTER_FAILED, run.text
    refusal = f"ResourceQuota/{namespace}/{QUOTA} ({QUOTA}.yaml:1): not created: it did not"
    assert refusal in run.err and "rule: not_owned" in run.err
    assert_quota_is_the_admins(admin_api, namespace)

    git_repo.commit({f"{QUOTA}.yaml": None})
    started = time.time()
    again = gitopsd("sync", url, *scope(namespace), "--prune")

    assert again.code == 0, again.text
    assert deleted_quotas(control_plane, namespace, started) == []
    assert_quota_is_the_admins(admin_api, namespace)


@pytest.mark.case("SE-16")
def test_se16_a_gitsync_never_takes_an_object_created_while_its_wave_waits(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    gate: Gate,
) -> None:
    """A tenant's attack: a GitSync without a ServiceAccount (the daemon's own rights),
    prune on, whose wave 1 names an object its tenant may not touch."""
    git_repo.commit({**deployment("web", pods_on=gate.node_selector), **quota_file("3", wave="1")})
    operator(daemons, namespace)
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "prune": True, "timeout": "30m"}
    create(admin_api, namespace, "tenant", spec)
    wait_for(lambda: web_exists(admin_api, namespace), "web", 120)
    admin_creates_quota(admin_api, namespace)
    gate.open()

    refused = wait_for(
        lambda: _failing_with(admin_api, namespace, f"ResourceQuota/{namespace}/{QUOTA}"),
        "the GitSync to refuse the admin's quota",
        90,
    )
    assert "rule: not_owned" in refused
    assert_quota_is_the_admins(admin_api, namespace)

    git_repo.commit({f"{QUOTA}.yaml": None})
    started = time.time()
    wait_ready(admin_api, namespace, "tenant", "True", "Succeeded", 90)

    assert deleted_quotas(control_plane, namespace, started) == []
    assert_quota_is_the_admins(admin_api, namespace)


def _failing_with(api: Any, namespace: str, text: str) -> str | None:
    found: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "gitopsd.io", "v1alpha1", namespace, "gitsyncs", "tenant"
    )
    conditions = (found.get("status") or {}).get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c["type"] == "Ready"), {})
    message = str(ready.get("message", ""))
    return message if ready.get("status") == "False" and text in message else None


def deleted(core: Any, namespace: str) -> None:
    core.delete_namespaced_config_map("member", namespace)


def drifted(core: Any, namespace: str) -> None:
    core.patch_namespaced_config_map("member", namespace, {"data": {"k": "drifted"}})


HEALS = {
    "a deleted member created again": (deleted, "not created: it did not exist when"),
    "a drifted member configured": (drifted, "not written: it was deleted and created anew"),
}


@pytest.mark.case("SE-16")
@pytest.mark.parametrize(("provoke", "refusal"), HEALS.values(), ids=HEALS)
def test_se16_a_heal_on_its_way_never_takes_an_object_made_anew_by_someone_else(
    daemons: Daemons,
    proxy: FaultProxy,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    provoke: Callable[[Any, str], None],
    refusal: str,
) -> None:
    """The heal is held in the proxy while an admin deletes the member (if it is still
    there) and creates another object of its name; then the heal reaches the server."""
    git_repo.commit({"member.yaml": MEMBER})
    daemon = daemons.start(git_server.file_url(git_repo), server=proxy.url, prune=True)
    core: Any = client.CoreV1Api(admin_api)
    wait_for(lambda: _exists(core, namespace), "the first sync")
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready")

    def the_heal(request: Request) -> bool:
        write = request.method == "PATCH" and "dryRun" not in request.query
        return write and request.path.endswith(f"/namespaces/{namespace}/configmaps/member")

    held = proxy.inject(Fault(the_heal, delay_seconds=3.0, times=1))
    provoke(core, namespace)
    wait_for(lambda: held.fired == 1, "the heal to be on its way")
    if _exists(core, namespace):
        deleted(core, namespace)
    body = {"metadata": {"name": "member"}, "data": {"owner": "admin"}}
    core.create_namespaced_config_map(namespace, body)
    started = time.time()

    daemon.wait_value("gitopsd_errors_total", lambda v: v >= 1, "the heal refused", stage="cluster")
    logged = [line["message"] for line in daemon.log_lines() if line.get("stage") == "cluster"]
    member = f"ConfigMap/{namespace}/member (member.yaml:1): "
    assert any(member + refusal in m and "not_owned" in m for m in logged), logged
    live: Any = core.read_namespaced_config_map("member", namespace)
    assert live.data == {"owner": "admin"}
    assert PART_OF not in (live.metadata.labels or {})
    deletes = [w for w in audit.writes_by_anyone(control_plane, started) if w.verb == "delete"]
    assert not [w for w in deletes if w.namespace == namespace]  # others' namespaces go away


def _exists(core: Any, namespace: str) -> bool:
    names = {item.metadata.name for item in core.list_namespaced_config_map(namespace).items}
    return "member" in names
