"""What only a cluster with its controllers does, met by gitopsd: a namespace deleted under a
source (catalogue FA-27), garbage collection after prune, an immutable Job template changed
in git, and a tenant bound to the built-in `edit` role (aggregated by its controller)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import scope
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.kube import create_namespace
from tests.harness.manifests import config_map_files_with_data, deployment, job, under
from tests.harness.operators import operator
from tests.harness.waiting import wait_for

HOLD = "gitopsd.test/hold"
"""A finalizer nobody removes but the test: it keeps a namespace Terminating."""


@pytest.fixture
def doomed(admin_api: Any) -> Iterator[str]:
    """A second namespace, which the test deletes while a source syncs into it."""
    name = create_namespace(admin_api, "doomed")
    yield name
    release_blocker(admin_api, name)


def release_blocker(api: Any, namespace: str) -> None:
    core: Any = client.CoreV1Api(api)
    try:
        core.patch_namespaced_config_map("blocker", namespace, {"metadata": {"finalizers": None}})
    except client.ApiException as error:
        if error.status != 404:
            raise


def namespace_phase(api: Any, name: str) -> str | None:
    core: Any = client.CoreV1Api(api)
    try:
        phase: str = core.read_namespace(name).status.phase
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return phase


@pytest.mark.case("FA-27")
def test_fa27_a_namespace_being_deleted_fails_its_source_clearly_while_others_go_on(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    doomed: str,
) -> None:
    git_repo.commit(
        {
            **under("doomed", config_map_files_with_data("a")),
            **under("other", config_map_files_with_data("b")),
        }
    )
    url = git_server.file_url(git_repo)
    sources = [
        daemons.source(url, name="doomed", paths=["doomed"], namespace=doomed),
        daemons.source(url, name="other", paths=["other"]),
    ]
    daemon = daemons.start_with(sources, "daemon").start()
    wait_for(lambda: config_map_value(admin_api, doomed, "a") == "v", "a applied")
    core: Any = client.CoreV1Api(admin_api)
    blocker = {"metadata": {"name": "blocker", "finalizers": [HOLD]}}
    core.create_namespaced_config_map(doomed, blocker)

    core.delete_namespace(doomed)
    wait_for(lambda: namespace_phase(admin_api, doomed) == "Terminating", "Terminating")
    changed = {
        **under("doomed", config_map_files_with_data("a", value="w")),
        **under("other", config_map_files_with_data("b", value="w")),
    }
    git_repo.commit(changed)

    wait_for(lambda: config_map_value(admin_api, namespace, "b", "k") == "w", "other applied")
    daemon.wait_value("gitopsd_errors_total", lambda v: v >= 1, "doomed fails", source="doomed")
    a = f"ConfigMap/{doomed}/a"
    terminating = f'{a} (doomed/a.yaml:1): configmaps "a" is forbidden: unable to create new'
    refused = messages(daemon, "doomed")
    assert any(terminating in m and "is being terminated" in m for m in refused), refused
    assert daemon.value("gitopsd_errors_total", source="other") == 0

    release_blocker(admin_api, doomed)
    wait_for(lambda: namespace_phase(admin_api, doomed) is None, "the namespace gone", 60)
    git_repo.commit(under("doomed", config_map_files_with_data("a", value="z")))  # tried at once
    gone = (
        f"namespace {doomed} does not exist, and this revision does not create it: "
        f"1 of its objects goes there ({a})"
    )
    wait_for(lambda: any(gone in m for m in messages(daemon, "doomed")), "the namespace named")
    git_repo.commit(under("other", config_map_files_with_data("b", value="x")))
    wait_for(lambda: config_map_value(admin_api, namespace, "b", "k") == "x", "other goes on")


def messages(daemon: DaemonProcess, source: str) -> list[str]:
    return [line["message"] for line in daemon.log_lines() if line.get("source") == source]


def owned_by(api: Any, namespace: str, kind: str) -> list[str]:
    """Names of the ReplicaSets or Pods in `namespace` (each owned by a controller)."""
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    found = (
        apps.list_namespaced_replica_set(namespace)
        if kind == "ReplicaSet"
        else core.list_namespaced_pod(namespace)
    )
    return [item.metadata.name for item in found.items]


def test_prune_of_a_deployment_leaves_its_replica_sets_and_pods_to_garbage_collection(
    daemons: Daemons, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**deployment("web"), **config_map_files_with_data("settings")})
    daemon = daemons.start(git_server.file_url(git_repo), prune=True)
    daemon.wait_value("gitopsd_source_health", lambda v: v == 1, "web rolled out", status="Current")
    assert owned_by(admin_api, namespace, "ReplicaSet") and owned_by(admin_api, namespace, "Pod")
    assert daemon.value("gitopsd_drift_objects") == 0  # its ReplicaSet and Pod are not drift

    git_repo.commit({"web.yaml": None})

    wait_for(lambda: not owned_by(admin_api, namespace, "ReplicaSet"), "ReplicaSets collected")
    wait_for(lambda: not owned_by(admin_api, namespace, "Pod"), "Pods collected", 60)
    daemon.wait_value(
        "gitopsd_apply_total", lambda v: v == 1, "web pruned", action="pruned", result="success"
    )
    assert daemon.value("gitopsd_drift_objects") == 0
    assert daemon.value("gitopsd_errors_total") == 0


def test_a_job_whose_template_changed_in_git_is_refused_alone_naming_the_field(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**job("migrate"), **config_map_files_with_data("settings")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "2m").code == 0
    changed = job("migrate")["migrate.yaml"].replace('command: ["true"]', 'command: ["false"]')
    git_repo.commit({"migrate.yaml": changed, **config_map_files_with_data("settings", value="w")})

    run = gitopsd("sync", url, *scope(namespace))

    assert run.code == 2, run.text
    assert f"batch/Job/{namespace}/migrate" in run.err
    assert "spec.template" in run.err and "cannot change once set" in run.err
    assert "gitopsd.io/sync-options: replace-on-immutable" in run.err  # what to do
    assert config_map_value_of(gitopsd, namespace, "settings") == "w"  # the rest applied


def config_map_value_of(gitopsd: Gitopsd, namespace: str, name: str) -> str:
    return gitopsd.kubectl("get", "configmap", name, "-n", namespace, "-o", "jsonpath={.data.k}")


def test_a_tenant_bound_to_the_built_in_edit_role_syncs(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "tenant"}})
    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "tenant-edit"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        },
    )
    git_repo.commit({**deployment("web"), **config_map_files_with_data("settings")})
    operator(daemons, namespace)

    spec = {"repository": {"url": git_server.file_url(git_repo)}, "serviceAccountName": "tenant"}
    create(admin_api, namespace, "tenant", spec)

    ready = wait_ready(admin_api, namespace, "tenant", "True", "Succeeded", 90)
    kinds = {k["groupKind"]: k["count"] for k in ready["status"]["inventory"]["kinds"]}
    assert kinds == {"ConfigMap": 1, "Deployment.apps": 1}
