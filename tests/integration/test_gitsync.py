"""Operator mode against the real control plane: GitSyncs created, changed, suspended,
resumed and deleted while a daemon serves them; their status, Events and printer columns
as kubectl shows them; impersonation as the audit log records it; secrets never shown."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from kubernetes import client, watch

from tests.harness import audit
from tests.harness.canary import Canary
from tests.harness.cli import EXAMPLES, Gitopsd, example_files
from tests.harness.cluster_reads import config_map_data_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import (
    GROUP,
    PLURAL,
    VERSION,
    condition,
    create,
    credentials_secret,
    events,
    get,
    patch_spec,
    wait_ready,
)
from tests.harness.kube import Gate, create_namespace
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import operator
from tests.harness.waiting import wait_for


def reasons(api: Any, namespace: str, name: str) -> list[str]:
    return [event.reason for event in events(api, namespace, name)]


def test_a_gitsync_is_created_updated_suspended_resumed_and_deleted(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    gitopsd: Gitopsd,
) -> None:
    first = git_repo.commit(
        {"app/a.yaml": config_map_with_value("a"), "other/b.yaml": config_map_with_value("b")}
    )
    secret = credentials_secret(admin_api, namespace, git_server, git_server.http_url(git_repo))
    daemon = operator(daemons, namespace)
    repository = {"url": git_server.http_url(git_repo), "secretRef": {"name": secret}}
    create(admin_api, namespace, "web", {"repository": repository, "paths": ["app"]})

    synced = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    status = synced["status"]
    assert status["observedGeneration"] == 1
    assert status["lastAppliedRevision"] == status["lastAttemptedRevision"] == first
    assert status["inventory"] == {"total": 1, "kinds": [{"groupKind": "ConfigMap", "count": 1}]}
    assert status["drift"]["total"] == 0 and status["lastSyncTime"]
    assert synced["metadata"]["finalizers"] == ["gitopsd.io/finalizer"]
    assert config_map_data_value(admin_api, namespace, "a") == "one"
    assert config_map_data_value(admin_api, namespace, "b") is None
    table = gitopsd.kubectl("get", "gitsyncs", "-n", namespace).splitlines()
    assert table[0].split() == [
        "NAME",
        "READY",
        "MODE",
        "REVISION",
        "DRIFT",
        "HEALTH",
        "SUSPENDED",
        "AGE",
    ]
    assert table[1].split()[:6] == ["web", "True", "enforce", first, "0", "Current"]
    wait_for(lambda: "Synced" in reasons(admin_api, namespace, "web"), "a Synced Event")
    synced_event = events(admin_api, namespace, "web")[0]
    assert synced_event.type == "Normal" and first in synced_event.message
    assert (
        daemon.value("gitopsd_source_revision_info", source=f"{namespace}/web", revision=first) == 1
    )

    # A spec change is picked up at once, under a new generation.
    patch_spec(admin_api, namespace, "web", {"paths": ["app", "other"]})
    changed = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    assert changed["status"]["observedGeneration"] == 2
    assert changed["status"]["inventory"]["total"] == 2
    assert config_map_data_value(admin_api, namespace, "b") == "one"

    # Suspended: a new revision is not applied, and the condition says why.
    patch_spec(admin_api, namespace, "web", {"suspend": True})
    wait_ready(admin_api, namespace, "web", "True", "Suspended")
    second = git_repo.commit({"app/a.yaml": config_map_with_value("a", "two")})
    gitopsd.kubectl("wait", "--for=condition=Ready", "gitsync/web", "-n", namespace)
    assert config_map_data_value(admin_api, namespace, "a") == "one"

    patch_spec(admin_api, namespace, "web", {"suspend": False})
    resumed = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    wait_for(
        lambda: config_map_data_value(admin_api, namespace, "a") == "two", "the resumed GitSync"
    )
    resumed = wait_for(
        lambda: (
            (g := get(admin_api, namespace, "web"))
            and g["status"]["lastAppliedRevision"] == second
            and g
        ),
        "the new revision in status",
    )
    assert resumed["status"]["observedGeneration"] == 4

    # Deleted without delete-policy: what it applied stays, and so does the parent.
    client.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "web"
    )
    wait_for(lambda: get(admin_api, namespace, "web") is None, "the GitSync gone")
    assert config_map_data_value(admin_api, namespace, "a") == "two"
    assert config_map_data_value(admin_api, namespace, "b") == "one"
    logs = daemon.logs()
    assert git_server.password not in logs


def test_a_rotated_git_password_is_read_after_the_poll_the_old_one_failed(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """Polls that succeed read no Secret; one that fails has its GitSync read whole, so the
    rotated Secret is used by the next poll (nothing about the GitSync changed)."""
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    url = git_server.http_url(git_repo)
    secret = credentials_secret(admin_api, namespace, git_server, url)
    operator(daemons, namespace)
    create(admin_api, namespace, "web", {"repository": {"url": url, "secretRef": {"name": secret}}})
    wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    old, new = git_server.password, "rotated-" + git_server.password
    git_server.password = new
    try:
        wait_for(
            lambda: condition(get(admin_api, namespace, "web"), "Ready").get("status") == "False",
            "the old password refused",
        )
        core: Any = client.CoreV1Api(admin_api)
        core.patch_namespaced_secret(secret, namespace, {"stringData": {"password": new}})
        git_repo.commit({"a.yaml": config_map_with_value("a", value="after")})

        wait_for(lambda: config_map_data_value(admin_api, namespace, "a") == "after", "the commit")
        wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    finally:
        git_server.password = old


def test_a_new_revision_is_reported_with_the_health_its_writes_were_read_back_with(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """Every status a sync publishes carries its writes' health as the watch brought them
    back: Ready goes from one revision's Succeeded to the next's, never through "applied;
    its new status is not read yet" (and a request is not answered with it)."""
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    operator(daemons, namespace)
    create(
        admin_api,
        namespace,
        "web",
        {"repository": {"url": git_server.file_url(git_repo)}, "interval": "1h"},
    )
    found = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    second = git_repo.commit({"a.yaml": config_map_with_value("a", value="two")})
    objects: Any = client.CustomObjectsApi(admin_api)
    stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
        objects.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version=found["metadata"]["resourceVersion"],
        timeout_seconds=60,
    )
    annotation = {"gitopsd.io/reconcile-requested-at": "second"}
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "web", {"metadata": {"annotations": annotation}}
    )

    readies: list[dict[str, Any]] = []
    status: dict[str, Any] = {}
    for event in stream:
        status = event["object"].get("status") or {}
        readies.append(condition(event["object"], "Ready"))
        if status.get("lastHandledReconcileAt") == "second":
            break

    assert status.get("lastAppliedRevision") == second
    assert readies[-1]["reason"] == "Succeeded"
    assert not [r for r in readies if "not read yet" in r.get("message", "")]


@pytest.mark.case("SE-04")
def test_drift_shows_in_status_and_events_without_values_and_heals_in_enforce_mode(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    gitopsd: Gitopsd,
    canary: Canary,
) -> None:
    """SE-04:"""
    value = json.dumps(canary.value)
    secret = (
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  token: {value}\n"
    )
    git_repo.commit({"token.yaml": secret, "c.yaml": config_map_with_value("c")})
    daemon = operator(daemons, namespace)
    repository = {"url": git_server.file_url(git_repo)}
    create(admin_api, namespace, "watch", {"repository": repository})
    wait_ready(admin_api, namespace, "watch", "True", "Succeeded")
    patch_spec(admin_api, namespace, "watch", {"mode": "observe"})
    wait_ready(admin_api, namespace, "watch", "True", "Succeeded")

    changed = Canary.fresh()
    live = json.dumps({"stringData": {"token": changed.value}})
    gitopsd.kubectl("patch", "secret", "token", "-n", namespace, "--type=merge", "-p", live)
    other = '{"data": {"value": "other"}}'
    gitopsd.kubectl("patch", "configmap", "c", "-n", namespace, "--type=merge", "-p", other)

    def drifted() -> dict[str, Any] | None:
        found = get(admin_api, namespace, "watch")
        drift = ((found or {}).get("status") or {}).get("drift") or {}
        return found if drift.get("modified") == 2 else None

    found = wait_for(drifted, "both objects drifted in status")
    objects = {o["object"]: o for o in found["status"]["drift"]["objects"]}
    assert "data.token" in {f["path"] for f in objects[f"Secret/{namespace}/token"]["fields"]}
    assert objects[f"ConfigMap/{namespace}/c"]["fields"] == [
        {"path": "data.value", "manager": "kubectl-patch"}
    ]
    row = gitopsd.kubectl("get", "gs", "watch", "-n", namespace).splitlines()[1].split()
    assert row[:3] == ["watch", "False", "observe"] and row[4] == "2"
    wait_for(lambda: "DriftDetected" in reasons(admin_api, namespace, "watch"), "the Event")

    patch_spec(admin_api, namespace, "watch", {"mode": "enforce"})
    wait_ready(admin_api, namespace, "watch", "True", "Succeeded")
    assert config_map_data_value(admin_api, namespace, "c") == "one"
    for leaked in (canary, changed):
        leaked.assert_not_in_cluster(admin_api, namespace)  # status, Events, the parent
        leaked.assert_absent(daemon.logs(), "the logs")
        leaked.assert_absent(daemon.metrics(), "/metrics")


def test_delete_policy_prune_withdraws_what_the_gitsync_applied(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a"), "b.yaml": config_map_with_value("b")})
    operator(daemons, namespace)
    annotations = {"gitopsd.io/delete-policy": "prune"}
    spec = {"repository": {"url": git_server.file_url(git_repo)}}
    create(admin_api, namespace, "gone", spec, annotations=annotations)
    wait_ready(admin_api, namespace, "gone", "True", "Succeeded")
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "bystander"}})

    client.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "gone"
    )
    wait_for(lambda: get(admin_api, namespace, "gone") is None, "the GitSync gone")
    names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
    assert "a" not in names and "b" not in names and "gitopsd-gone" not in names
    assert "bystander" in names
    pruned = [e for e in events(admin_api, namespace, "gone") if e.reason == "Pruned"]
    assert "pruned 2 objects" in pruned[0].message


def test_a_gitsync_acts_only_with_its_service_accounts_rights(
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "tenant"}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "config-maps"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "create", "patch", "delete"],
                }
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "tenant"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "config-maps",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        },
    )
    service = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n    - port: 80\n"
    )
    git_repo.commit({"a.yaml": config_map_with_value("a"), "service.yaml": service})
    daemon = operator(daemons, namespace)
    since = time.time()
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "serviceAccountName": "tenant"}
    create(admin_api, namespace, "tenant", spec)

    stalled = wait_ready(admin_api, namespace, "tenant", "False", "Forbidden")
    message = condition(stalled, "Stalled")["message"]
    assert condition(stalled, "Stalled")["status"] == "True"
    user = f"system:serviceaccount:{namespace}:tenant"
    assert f'User "{user}" cannot list resource "services"' in message
    assert config_map_data_value(admin_api, namespace, "a") is None  # nothing applied: all or none
    # nothing was assessed: its health is not known, which is not Current
    assert stalled["status"]["health"] == {
        "status": "Unknown",
        "total": 0,
        "current": 0,
        "objects": [],
    }

    # Within its rights it syncs, and every write for it is made as the tenant.
    git_repo.commit({"service.yaml": None})
    wait_ready(admin_api, namespace, "tenant", "True", "Succeeded")
    assert config_map_data_value(admin_api, namespace, "a") == "one"
    as_tenant = [w for w in audit.impersonated(control_plane, user, since) if w.code < 300]
    assert {(w.resource, w.name) for w in as_tenant if not w.dry_run} >= {
        ("configmaps", "a"),
        ("configmaps", "gitopsd-tenant"),
    }
    own = audit.writes(control_plane, daemon.user, since)
    mine = {w.resource for w in own if w.namespace == namespace and not w.acting_as}
    assert mine <= {"gitsyncs", "events"}, "the daemon wrote for the tenant as itself"


def test_a_gitsync_without_service_account_stays_in_its_namespace(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    elsewhere = create_namespace(admin_api)
    git_repo.commit(
        {
            "a.yaml": config_map_with_value("a"),
            "b.yaml": config_map_with_value("b", namespace=elsewhere),
        }
    )
    operator(daemons, namespace)
    create(admin_api, namespace, "confined", {"repository": {"url": git_server.file_url(git_repo)}})

    stalled = wait_ready(admin_api, namespace, "confined", "False", "OutOfNamespace")
    assert f"ConfigMap/{elsewhere}/b" in condition(stalled, "Ready")["message"]
    assert config_map_data_value(admin_api, elsewhere, "b") is None
    assert config_map_data_value(admin_api, namespace, "a") is None
    wait_for(lambda: "Failed" in reasons(admin_api, namespace, "confined"), "a Failed Event")

    # A spec made invalid never holds up the GitSync's deletion (nothing can be pruned).
    objects: Any = client.CustomObjectsApi(admin_api)
    annotations = {"metadata": {"annotations": {"gitopsd.io/delete-policy": "prune"}}}
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "confined", annotations
    )
    patch_spec(admin_api, namespace, "confined", {"targetNamespace": elsewhere})
    wait_ready(admin_api, namespace, "confined", "False", "InvalidSpec")
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "confined")
    wait_for(lambda: get(admin_api, namespace, "confined") is None, "the GitSync gone")
    assert "PruneSkipped" in reasons(admin_api, namespace, "confined")

    # Another namespace's GitSync, impersonating an account with no rights here, cannot
    # touch this namespace either.
    tenant = create_namespace(admin_api)
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(tenant, {"metadata": {"name": "deployer"}})
    git_repo.commit({"b.yaml": None, "a.yaml": config_map_with_value("a", namespace=namespace)})
    settings = {"enabled": True, "namespaces": [tenant], "allowInsecure": True}
    daemons.start_with([], "operator-b", gitSyncs=settings).start()
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "serviceAccountName": "deployer"}
    create(admin_api, tenant, "intruder", spec)
    wait_ready(admin_api, tenant, "intruder", "False", "Forbidden")
    assert config_map_data_value(admin_api, namespace, "a") is None


def test_only_the_leader_writes_gitsync_status_and_objects(
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    election = {
        "enabled": True,
        "namespace": namespace,
        "leaseDuration": "4s",
        "renewDeadline": "3s",
        "retryPeriod": "1s",
    }
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True}
    leader = daemons.start_with([], "first", gitSyncs=settings, leaderElection=election).start()
    leader.wait_value("gitopsd_leader", lambda v: v == 1, "the first replica to lead")
    standby = daemons.start_with([], "second", gitSyncs=settings, leaderElection=election).start()
    wait_for(lambda: standby.get("/readyz")[0] == 200, "the standby to be ready")

    create(admin_api, namespace, "shared", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "shared", "True", "Succeeded")
    source = f"{namespace}/shared"
    standby.wait_value("gitopsd_reconcile_total", bool, "the standby to poll too", source=source)

    assert {w.name for w in audit.changes(control_plane, leader.user)} >= {"a", "shared"}
    assert audit.changes(control_plane, standby.user) == []


def test_the_example_gitsync_syncs_the_examples(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    gate: Gate,
) -> None:
    """examples/gitsync.yaml as written, but for its namespace and repository URL: Ready once
    the Deployment controller rolled its Deployment out (the gate holds it back first)."""
    example = yaml.safe_load((EXAMPLES / "gitsync.yaml").read_text())
    example["metadata"]["namespace"] = namespace
    example["spec"]["repository"]["url"] = git_server.file_url(git_repo)
    files = {f"app/{name}": text for name, text in example_files("app").items()}
    files["app/deployment.yaml"] = gate.hold(files["app/deployment.yaml"])
    sha = git_repo.commit(files)
    operator(daemons, namespace)
    objects: Any = client.CustomObjectsApi(admin_api)
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, example)

    progressing = wait_ready(admin_api, namespace, "app", "False", "Progressing")
    web = f"apps/Deployment/{namespace}/web"
    assert f"{web}: InProgress" in condition(progressing, "Ready")["message"]
    assert condition(progressing, "Reconciling")["status"] == "True"
    gate.open()

    ready = wait_ready(admin_api, namespace, "app", "True", "Succeeded")
    assert ready["status"]["lastAppliedRevision"] == sha
    kinds = {k["groupKind"]: k["count"] for k in ready["status"]["inventory"]["kinds"]}
    assert kinds == {"ConfigMap": 1, "Deployment.apps": 1, "Service": 1}


def test_a_gitsync_waits_for_the_gitsyncs_it_depends_on_and_a_cycle_stalls(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    gate: Gate,
) -> None:
    deployment = gate.hold((EXAMPLES / "app" / "deployment.yaml").read_text())
    git_repo.commit({"db/web.yaml": deployment, "app/cm.yaml": config_map_with_value("settings")})
    url = git_server.file_url(git_repo)
    operator(daemons, namespace)
    create(admin_api, namespace, "db", {"repository": {"url": url}, "paths": ["db"]})
    app = {"repository": {"url": url}, "paths": ["app"], "dependsOn": [{"name": "db"}]}
    create(admin_api, namespace, "app", app)

    waiting = wait_ready(admin_api, namespace, "app", "False", "DependencyNotReady")
    assert f"source {namespace}/db: " in condition(waiting, "Ready")["message"]
    assert config_map_data_value(admin_api, namespace, "settings") is None
    gate.open()
    wait_ready(admin_api, namespace, "db", "True", "Succeeded")
    wait_ready(admin_api, namespace, "app", "True", "Succeeded")
    assert config_map_data_value(admin_api, namespace, "settings") == "one"

    patch_spec(admin_api, namespace, "db", {"dependsOn": [{"name": "app"}]})

    stalled = wait_ready(admin_api, namespace, "db", "False", "InvalidSpec")
    cycle = f"{namespace}/db -> {namespace}/app -> {namespace}/db"
    assert f"spec.dependsOn forms a cycle: {cycle}" in condition(stalled, "Stalled")["message"]
