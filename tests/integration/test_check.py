"""`gitopsd check` against the real control plane: as admin everything passes; a user who
may not delete ConfigMaps (nor write Deployments) is told which verbs on which resources;
a kubeconfig that points at nothing fails at the first check, naming the server, context
and kubeconfig; and -o json is a valid CheckResult either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness.cli import Gitopsd
from tests.harness.controlplane import ControlPlane, free_port, write_kubeconfig
from tests.harness.kube import account

ALL = ["cluster", "kubernetes", "rights", "gitsync", "helm", "kubectl"]
SYNC_VERBS_BUT_DELETE = ("get", "list", "watch", "create", "patch")


def test_as_admin_every_check_passes_and_the_cluster_is_named(
    gitopsd: Gitopsd, control_plane: ControlPlane, namespace: str, gitsync_crd: str
) -> None:
    as_text = gitopsd("check", "-n", namespace, "--resource", "deployments.apps")
    as_json = gitopsd("check", "-n", namespace, "-o", "json")

    assert as_text.code == 0, as_text.text
    assert [line.split(":")[0].split() for line in as_text.out.splitlines()] == [
        ["ok", name] for name in ALL
    ]
    cluster = as_text.out.splitlines()[0]
    assert control_plane.url in cluster and "(context test, user " in cluster
    assert f"kubeconfig {control_plane.kubeconfig}" in cluster
    assert f"configmaps, deployments.apps in namespace {namespace}" in as_text.out
    found = as_json.document("CheckResult")
    assert [(check["name"], check["ok"]) for check in found["checks"]] == [
        (name, True) for name in ALL
    ]
    assert (as_json.code, found["error"]) == (0, None)


def test_a_user_who_may_not_delete_is_told_which_verbs_on_which_resources(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
    gitsync_crd: str,
) -> None:
    kubeconfig = account(
        control_plane, admin_api, namespace, tmp_path, "view", *SYNC_VERBS_BUT_DELETE
    )
    as_user = ("-n", namespace, "--kubeconfig", kubeconfig, "--resource", "deployments.apps")

    as_text = gitopsd("check", *as_user)
    as_json = gitopsd("check", *as_user, "-o", "json")

    assert as_text.code == 4, as_text.text
    refused = (
        "may not delete configmaps; nor create, patch, delete deployments.apps in namespace "
        + namespace
    )
    assert f"failed rights: {refused}\n" in as_text.out
    assert "gitopsd: error: 1 of 6 checks failed: rights" in as_text.err
    found = as_json.document("CheckResult")
    assert {check["name"]: check["ok"] for check in found["checks"]} == {
        name: name != "rights" for name in ALL
    }
    assert found["error"]["reason"] == "forbidden" and found["error"]["exitCode"] == 4
    assert found["error"]["message"] == refused


def test_a_kubeconfig_that_points_at_nothing_fails_the_first_check_and_asks_no_more(
    gitopsd: Gitopsd, control_plane: ControlPlane, tmp_path: Path
) -> None:
    nowhere = f"https://127.0.0.1:{free_port()}"
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    write_kubeconfig(kubeconfig, nowhere, control_plane.ca_file, "someone", "a-token")

    as_text = gitopsd("check", "--kubeconfig", str(kubeconfig))
    as_json = gitopsd("check", "--kubeconfig", str(kubeconfig), "-o", "json")

    assert as_text.code == 4, as_text.text
    first = as_text.out.splitlines()[0]
    assert first.startswith(f"failed cluster: GET /api: cannot reach the API server at {nowhere}")
    assert "(context test, user someone)" in first and f"kubeconfig {kubeconfig}" in first
    found = as_json.document("CheckResult")
    assert [check["name"] for check in found["checks"]] == ["cluster", "helm", "kubectl"]
    assert found["error"]["reason"] == "unreachable" and found["error"]["exitCode"] == 4


def test_no_kubeconfig_and_a_resource_the_cluster_does_not_serve_are_the_configurations_fault(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    missing = gitopsd("check", "--kubeconfig", str(tmp_path / "absent"), "-o", "json")
    typo = gitopsd("check", "--pre", "-n", namespace, "--resource", "deploymentz.apps")

    assert missing.code == 2, missing.text
    assert missing.document("CheckResult")["error"]["stage"] == "config"
    assert typo.code == 2, typo.text
    assert (
        "failed rights: --resource deploymentz.apps: the cluster serves no such resource"
        in typo.out
    )
    assert "gitsync" not in typo.out  # --pre: the prerequisites alone
