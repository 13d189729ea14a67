"""A person with rights in one namespace can use gitopsd there: the record lives where the
source applies, and nothing outside the namespace is needed (nor read, where it would be
refused: a record an earlier gitopsd kept in `default` is not looked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import DRIFT
from tests.harness.controlplane import ControlPlane
from tests.harness.kube import account
from tests.harness.manifests import folder
from tests.harness.records import earlier_record, parents


def test_a_user_with_edit_in_one_namespace_diffs_and_syncs_there(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = account(control_plane, admin_api, namespace, tmp_path, "edit")
    one = folder(tmp_path / "one", "a", "b")
    as_editor = ("-n", namespace, "--kubeconfig", kubeconfig)

    diff = gitopsd("diff", str(one), *as_editor)
    synced = gitopsd("sync", str(one), *as_editor, "--prune")
    folder(one, "a")
    pruned = gitopsd("sync", str(one), *as_editor, "--prune")

    assert diff.code == DRIFT, diff.text
    assert synced.code == 0, synced.text
    assert pruned.code == 0, pruned.text
    assert f"pruned     ConfigMap/{namespace}/b" in pruned.out
    assert config_map_names(admin_api, namespace) >= {"a"}
    assert len(parents(admin_api, namespace)) == 1  # its record, in its namespace


def test_a_user_who_may_view_and_patch_for_a_dry_run_can_diff(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    one = folder(tmp_path / "one", "a")
    assert gitopsd("sync", str(one), "-n", namespace).code == 0
    (one / "a.yaml").write_text((one / "a.yaml").read_text().replace("k: v", "k: w"))
    kubeconfig = account(control_plane, admin_api, namespace, tmp_path, "view", "patch")

    diff = gitopsd("diff", str(one), "-n", namespace, "--kubeconfig", kubeconfig, "-o", "json")

    assert diff.code == DRIFT, diff.text
    [drift] = diff.document("DiffResult")["drift"]
    assert (drift["object"]["name"], drift["state"]) == ("a", "modified")
    assert [change["path"] for change in drift["changes"]] == ["data.k"]


def test_an_earlier_record_a_user_may_read_but_not_delete_is_moved_and_said(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    one = folder(tmp_path / "one", "a")
    earlier = earlier_record(gitopsd, admin_api, one, namespace)
    kubeconfig = account(control_plane, admin_api, namespace, tmp_path, "edit")
    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    reader = f"{namespace}-reader"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
    rbac.create_namespaced_role("default", {"metadata": {"name": reader}, "rules": [rule]})
    subject = {"kind": "ServiceAccount", "name": "edit-user", "namespace": namespace}
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reader}
    binding = {"metadata": {"name": reader}, "roleRef": role, "subjects": [subject]}
    rbac.create_namespaced_role_binding("default", binding)
    as_editor = ("-n", namespace, "--kubeconfig", kubeconfig)

    moved = gitopsd("sync", str(one), *as_editor)
    again = gitopsd("sync", str(one), *as_editor)

    assert moved.code == 0, moved.text
    assert f"moved ConfigMap/default/{earlier} to ConfigMap/{namespace}/" in moved.err
    assert "the earlier parent, which now owns nothing, is yours to delete" in moved.err
    assert again.code == 0 and "gitopsd: note" not in again.err, again.text
    assert earlier in parents(admin_api, "default")
    assert gitopsd("diff", str(one), *as_editor).code == 0
