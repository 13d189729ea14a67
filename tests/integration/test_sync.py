"""gitopsd sync and diff against the real control plane and git server."""

from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client

from tests.harness import contract
from tests.harness.cli import Gitopsd, example_files
from tests.harness.cluster_reads import config_map_named
from tests.harness.commands import drift_of, scope
from tests.harness.gitserver import GitRepo, GitServer

EXAMPLES = ["app", "jobs", "daemonset", "statefulset", "alice"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_syncs_then_shows_no_drift(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, example: str
) -> None:
    git_repo.commit(example_files(example))
    url = git_server.file_url(git_repo)
    adopt = ["--adopt"] if example == "alice" else []  # other tests install the same CRD

    first = gitopsd("sync", url, *scope(namespace), *adopt)
    assert first.code == 0, first.text
    if not adopt:  # an adopted CRD may be "configured" rather than "created"
        assert f"{len(example_files(example))} created" in first.out

    assert drift_of(gitopsd, url, namespace) == []
    again = gitopsd("sync", url, *scope(namespace))
    assert again.code == 0, again.text
    assert "0 created, 0 configured" in again.out


def patch_config_map_as(admin_api: Any, namespace: str, manager: str, data: dict[str, str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web-config", "namespace": namespace},
        "data": data,
    }
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map(
        "web-config",
        namespace,
        body,
        field_manager=manager,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


OUT_OF_BAND_EDITS = {
    "scale replicas": (
        ["scale", "deployment/web", "--replicas=5"],
        ("apps/Deployment", "web"),
        "spec.replicas",
        5,
        2,
        "kubectl",
    ),
    "change an env var": (
        ["set", "env", "deployment/web", "MODE=debug"],
        ("apps/Deployment", "web"),
        "spec.template.spec.containers[name=web].env[name=MODE].value",
        "debug",
        "production",
        "kubectl-set",
    ),
    "add a label": (
        ["label", "deployment/web", "extra=yes"],
        ("apps/Deployment", "web"),
        "metadata.labels.extra",
        "yes",
        None,
        "kubectl-label",
    ),
    "change a ConfigMap value": (
        ["patch", "configmap/web-config", "-p", '{"data":{"GREETING":"hi"}}'],
        ("ConfigMap", "web-config"),
        "data.GREETING",
        "hi",
        "hello",
        "kubectl-patch",
    ),
}


@pytest.mark.parametrize("edit", OUT_OF_BAND_EDITS, ids=list(OUT_OF_BAND_EDITS))
def test_an_out_of_band_edit_is_reported_exactly_and_sync_restores_it(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, edit: str
) -> None:
    kubectl_args, (kind, name), path, live, desired, manager = OUT_OF_BAND_EDITS[edit]
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0

    gitopsd.kubectl(*kubectl_args, "-n", namespace)

    [drift] = drift_of(gitopsd, url, namespace)
    assert (contract.named(drift["object"]), drift["state"]) == (
        f"{kind}/{namespace}/{name}",
        "modified",
    )
    assert drift["changes"] == [
        {
            "path": path,
            "live": live,
            "desired": desired,
            "manager": manager,
            "decision": "heal",  # no drift rule: what a sync does
            "rule": None,
        }
    ]
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    assert drift_of(gitopsd, url, namespace) == []


def test_a_deleted_object_is_reported_missing_and_recreated(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0

    gitopsd.kubectl("delete", "configmap/web-config", "-n", namespace)

    [drift] = drift_of(gitopsd, url, namespace)
    assert (contract.named(drift["object"]), drift["state"]) == (
        f"ConfigMap/{namespace}/web-config",
        "missing",
    )
    assert drift["origin"] == "configmap.yaml:1"
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    assert drift_of(gitopsd, url, namespace) == []


@pytest.mark.case("FA-07")
def test_a_field_taken_by_another_manager_is_attributed_and_taken_back(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """FA-07, as decided: the conflict is forced by default and each loss reported; with
    --no-force-conflicts it is reported instead."""
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0

    patch_config_map_as(admin_api, namespace, "intruder", {"LOG_LEVEL": "debug"})

    [drift] = drift_of(gitopsd, url, namespace)
    assert drift["changes"] == [
        {
            "path": "data.LOG_LEVEL",
            "live": "debug",
            "desired": "info",
            "manager": "intruder",
            "decision": "heal",
            "rule": None,
        }
    ]
    refused = gitopsd("sync", url, *scope(namespace), "--no-force-conflicts")
    assert refused.code == 4
    assert "intruder" in refused.err and "web-config" in refused.err
    assert config_map_named(admin_api, namespace, "web-config").data["LOG_LEVEL"] == "debug"

    forced = gitopsd("sync", url, *scope(namespace))
    assert forced.code == 0, forced.text
    assert "intruder lost .data.LOG_LEVEL" in forced.out
    assert config_map_named(admin_api, namespace, "web-config").data["LOG_LEVEL"] == "info"
    assert drift_of(gitopsd, url, namespace) == []


def test_an_existing_object_is_adopted_only_when_asked(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "web-config"}, "data": {"GREETING": "old"}}
    )
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)

    reason = "exists and no gitopsd source manages it; sync --adopt takes it over"
    [unowned] = [d for d in drift_of(gitopsd, url, namespace) if d["state"] == "unowned"]
    assert contract.named(unowned["object"]) == f"ConfigMap/{namespace}/web-config"
    assert unowned["reason"].startswith(reason)

    refused = gitopsd("sync", url, *scope(namespace))
    assert refused.code == 4
    assert f"ConfigMap/{namespace}/web-config (configmap.yaml:1): {reason}" in refused.err
    apps: Any = client.AppsV1Api(admin_api)
    assert apps.list_namespaced_deployment(namespace).items == []  # nothing applied

    adopted = gitopsd("sync", url, *scope(namespace), "--adopt")
    assert adopted.code == 0, adopted.text
    assert config_map_named(admin_api, namespace, "web-config").data["GREETING"] == "hello"


def test_a_diff_piped_into_head_ends_quietly_with_its_own_exit_code(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """More output than a pipe holds (64 KiB), so the reader is gone before it is written."""
    value = "x" * 2048
    git_repo.commit(
        {
            f"cm-{n}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{n}}}\n"
            f"data: {{k: {value}}}\n"
            for n in range(60)
        }
    )
    diff_command = [
        sys.executable, "-m", "gitopsd", "diff", git_server.file_url(git_repo), *scope(namespace),
        "--kubeconfig", str(gitopsd.plane.kubeconfig), "--cache-dir", str(gitopsd.cache),
    ]  # fmt: skip
    piped = f"set -o pipefail; {shlex.join(diff_command)} | head -1"

    run = subprocess.run(
        ["bash", "-c", piped], capture_output=True, text=True, timeout=120, check=False
    )

    assert run.returncode == 1, run.stderr  # drift: gitopsd's code, not a broken pipe's
    assert run.stdout == f"missing ConfigMap/{namespace}/cm-0 (cm-0.yaml:1)\n"
    assert run.stderr == ""


def test_sync_as_json_describes_a_failure_before_anything_was_read(
    gitopsd: Gitopsd, git_server: GitServer, namespace: str
) -> None:
    missing = (git_server.root / "missing.git").as_uri()

    run = gitopsd("sync", missing, *scope(namespace), "-o", "json")

    assert run.code == 3, run.text
    document = run.document("SyncResult")
    assert document["revision"] is None and document["outcomes"] == []
    assert document["error"]["exitCode"] == 3
    assert document["error"]["stage"] == "source"
    assert "missing.git" in document["error"]["message"]
