"""The harness is real: a kube-apiserver + etcd and a git server that behave as in production."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.harness.controlplane import (
    Binaries,
    ControlPlane,
    process_alive,
    running_control_plane,
)
from tests.harness.gitserver import GitRepo, GitServer, git
from tests.harness.kube import api_client, service_account_token, wait_established
from tests.harness.waiting import wait_for

ALICE = ("k106.com", "v1alpha1")  # group and version
ALICE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "alices.k106.com"},
    "spec": {
        "group": "k106.com",
        "scope": "Namespaced",
        "names": {"plural": "alices", "singular": "alice", "kind": "Alice", "shortNames": ["ac"]},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["myvalue"],
                                "properties": {"myvalue": {"type": "string"}},
                            }
                        },
                        "required": ["spec"],
                    }
                },
            }
        ],
    },
}


def apply(api_call: Any, *args: Any, body: dict[str, Any], manager: str = "gitopsd") -> Any:
    """Server-side apply through the official client."""
    return api_call(
        *args,
        body=body,
        field_manager=manager,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def test_a_namespace_is_created_and_active(admin_api: Any, namespace: str) -> None:
    core: Any = client.CoreV1Api(admin_api)
    live = core.read_namespace(namespace)
    assert live.metadata.name == namespace
    assert live.status.phase == "Active"


def test_a_custom_resource_definition_serves_and_validates(admin_api: Any, namespace: str) -> None:
    extensions: Any = client.ApiextensionsV1Api(admin_api)
    apply(extensions.patch_custom_resource_definition, "alices.k106.com", body=ALICE_CRD)
    wait_established(admin_api, "alices.k106.com")
    custom: Any = client.CustomObjectsApi(admin_api)
    alice = {
        "apiVersion": "k106.com/v1alpha1",
        "kind": "Alice",
        "metadata": {"name": "alice"},
        "spec": {"myvalue": "hello"},
    }
    created = custom.create_namespaced_custom_object(*ALICE, namespace, "alices", alice)
    assert created["spec"] == {"myvalue": "hello"}

    for bad_spec in ({"myvalue": 5}, {}):
        bad = {**alice, "metadata": {"name": "bad"}, "spec": bad_spec}
        with pytest.raises(ApiException) as rejected:
            custom.create_namespaced_custom_object(*ALICE, namespace, "alices", bad)
        assert rejected.value.status == 422
        assert "spec.myvalue" in str(rejected.value.body)


def test_server_side_apply_records_the_field_manager(admin_api: Any, namespace: str) -> None:
    core: Any = client.CoreV1Api(admin_api)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": namespace},
        "data": {"key": "value"},
    }
    first = apply(core.patch_namespaced_config_map, "app", namespace, body=config_map)
    second = apply(core.patch_namespaced_config_map, "app", namespace, body=config_map)

    assert second.metadata.resource_version == first.metadata.resource_version  # a no-op
    [entry] = second.metadata.managed_fields
    assert (entry.manager, entry.operation) == ("gitopsd", "Apply")
    assert "f:key" in entry.fields_v1["f:data"]


def test_a_watch_from_a_listed_resource_version_sees_an_out_of_band_change(
    admin_api: Any, namespace: str
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "watched", "namespace": namespace},
        "data": {"key": "a", "other": "x"},
    }
    apply(core.patch_namespaced_config_map, "watched", namespace, body=config_map)
    listed = core.list_namespaced_config_map(namespace)

    core.patch_namespaced_config_map(
        "watched", namespace, {"data": {"key": "b"}}, field_manager="kubectl-edit"
    )

    watcher: Any = watch.Watch()  # type: ignore[no-untyped-call]
    stream = watcher.stream(
        core.list_namespaced_config_map,
        namespace,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=20,
    )
    event = next(e for e in stream if e["object"].metadata.name == "watched")
    assert event["type"] == "MODIFIED"
    assert event["object"].data == {"key": "b", "other": "x"}
    entries = event["object"].metadata.managed_fields
    owners = {entry.manager: set(entry.fields_v1["f:data"]) for entry in entries}
    assert owners == {"gitopsd": {"f:other"}, "kubectl-edit": {"f:key"}}  # the edit took `key` over


def test_a_service_account_token_is_bound_by_rbac(
    admin_api: Any, namespace: str, control_plane: ControlPlane
) -> None:
    token = service_account_token(admin_api, namespace, "limited")
    limited: Any = client.CoreV1Api(api_client(control_plane, token))
    with pytest.raises(ApiException) as forbidden:
        limited.list_namespaced_config_map(namespace)
    assert forbidden.value.status == 403

    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "read-config-maps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "limited-reads"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "read-config-maps",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": namespace}],
        },
    )
    wait_for(lambda: _can_list(limited, namespace), "the RoleBinding to take effect")
    with pytest.raises(ApiException) as still_forbidden:
        limited.list_namespaced_secret(namespace)
    assert still_forbidden.value.status == 403


def _can_list(core: Any, namespace: str) -> bool:
    try:
        core.list_namespaced_config_map(namespace)
    except ApiException:
        return False
    return True


def clone(url: str, into: Path, *config: str) -> subprocess.CompletedProcess[str]:
    options = [arg for pair in config for arg in ("-c", pair)]
    return subprocess.run(
        ["git", *options, "clone", "-q", url, str(into)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(into.parent)},
    )


def test_git_server_serves_smart_http_with_basic_auth(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    sha = git_repo.commit({"app/cm.yaml": "kind: ConfigMap\n"})
    url = git_server.http_url(git_repo)

    anonymous = clone(url, tmp_path / "anonymous")
    assert anonymous.returncode != 0
    assert "could not read Username" in anonymous.stderr  # the server asked for credentials
    wrong = clone(url.replace("http://", "http://gitopsd:wrong@"), tmp_path / "wrong")
    assert wrong.returncode != 0
    assert "Authentication failed" in wrong.stderr

    authenticated = url.replace("http://", f"http://{git_server.username}:{git_server.password}@")
    assert clone(authenticated, tmp_path / "http").returncode == 0
    assert git("rev-parse", "HEAD", cwd=tmp_path / "http") == sha
    assert (tmp_path / "http" / "app" / "cm.yaml").read_text() == "kind: ConfigMap\n"


def test_git_server_helpers_rewrite_history(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    first = git_repo.commit({"a.yaml": "a: 1\n"}, "first")
    second = git_repo.commit({"a.yaml": None, "b.yaml": "b: 2\n"}, "second")
    assert git("ls-tree", "--name-only", second, cwd=git_repo.bare) == "b.yaml"

    git_repo.force_push(first)
    assert git_repo.head() == first

    git_repo.commit({"c.yaml": "c: 3\n"}, "on a branch", branch="feature")
    assert clone(git_server.file_url(git_repo), tmp_path / "file").returncode == 0
    git_repo.delete_branch("feature")
    assert "feature" not in git("branch", "--list", cwd=git_repo.bare)


@pytest.mark.cluster  # a control plane of its own, not the session's
def test_a_stopped_control_plane_leaves_no_process(binaries: Binaries, tmp_path: Path) -> None:
    with running_control_plane(binaries, tmp_path) as plane:
        with plane.apiserver_stopped():  # restarted: still stopped after the controllers
            pass
        pids = [process.pid for process in plane.processes]
        names = [Path(cast(list[str], process.args)[0]).name for process in plane.processes]
        assert names == [
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"
        ]  # fmt: skip
        assert all(process_alive(pid) for pid in pids)
    assert not any(process_alive(pid) for pid in pids)
