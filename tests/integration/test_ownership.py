"""Ownership cannot be claimed by copying a label (SE-16): gitopsd prunes only
what its source recorded as applied, with the uid it saw, and trusts only its own parent.

Every check of "deleted nothing" reads the API server's audit log, not gitopsd's report.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.inventory import ApplySet
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import CLUSTER_FAILED, PRUNE_BLOCKED, scope, synced
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files
from tests.harness.records import PART_OF


def deletes(plane: ControlPlane, since: float) -> list[str]:
    """Names of the objects the CLI (user admin) deleted since `since`."""
    return [w.name for w in audit.changes(plane, "admin", since) if w.verb == "delete"]


def member_label(admin_api: Any, namespace: str, name: str) -> str:
    """The ApplySet label of a live member, as anyone who may read it can copy it."""
    core: Any = client.CoreV1Api(admin_api)
    live = core.read_namespaced_config_map(name, namespace)
    label: str = live.metadata.labels[PART_OF]
    return label


def make_config_map(admin_api: Any, namespace: str, name: str, labels: dict[str, str]) -> None:
    body = {"metadata": {"name": name, "labels": labels}, "data": {"k": "someone else's"}}
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_config_map(namespace, body)


def test_se16c_a_copied_label_is_never_pruned(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    label = member_label(admin_api, namespace, "a")
    make_config_map(admin_api, namespace, "victim", {PART_OF: label})  # anyone with patch rights
    started = time.time()

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == PRUNE_BLOCKED, run.text
    assert f"ConfigMap/{namespace}/victim  (prune refused: not_owned)" in run.out
    assert "victim" in config_map_names(admin_api, namespace)
    assert deletes(control_plane, started) == []
    drift = gitopsd("diff", url, *scope(namespace), "-o", "json")
    assert drift.code == 0, drift.text  # not this source's, so not its extraneous drift
    assert drift.document("DiffResult")["drift"] == []


@pytest.mark.case("SE-16")
def test_se16_a_recreated_object_is_not_the_one_applied(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    label = member_label(admin_api, namespace, "d")
    client.CoreV1Api(admin_api).delete_namespaced_config_map("d", namespace)
    make_config_map(admin_api, namespace, "d", {PART_OF: label})  # same name, new uid
    git_repo.commit({"d.yaml": None})
    started = time.time()

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == PRUNE_BLOCKED, run.text
    assert f"ConfigMap/{namespace}/d  (prune refused: not_owned)" in run.out
    assert deletes(control_plane, started) == []


def test_an_object_this_source_applied_is_still_pruned(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """The record is what makes prune work: a member that left git goes, and leaves it."""
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    git_repo.commit({"d.yaml": None})
    started = time.time()
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    assert deletes(control_plane, started) == ["d"]
    git_repo.commit(config_map_files("d"))  # back in git: created anew, recorded anew
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    git_repo.commit({"d.yaml": None})
    again = time.time()
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    assert deletes(control_plane, again) == ["d"]


def test_a_tampered_parent_is_refused_and_nothing_is_written(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    parent = ApplySet.of_source("test", namespace).name
    tooling = "applyset.kubernetes.io/tooling=kubectl/v1.34"
    gitopsd.kubectl("annotate", "--overwrite", "configmap", parent, "-n", namespace, tooling)
    git_repo.commit({"d.yaml": None, **config_map_files("e")})
    started = time.time()

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == CLUSTER_FAILED, run.text
    assert (
        f"ConfigMap/{namespace}/{parent}: exists but is not the ApplySet parent of source "
        "test: its tooling is 'kubectl/v1.34'"
    ) in run.err
    assert audit.changes(control_plane, "admin", started) == []
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c", "d"}


def test_the_cli_and_the_daemon_name_parents_alike_and_never_collide(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """`--name X` is the daemon's source X (parent gitopsd-X); `--name gitopsd-X` is another
    source, whose prune never touches X's objects."""
    url = synced(gitopsd, git_server, git_repo, namespace, "a")
    other = git_server.create_repo(git_repo.name + "-other")
    other.commit(config_map_files("b"))
    other_url = git_server.file_url(other)
    flags = [*scope(namespace)[:-1], "gitopsd-test", "--prune", "--allow-empty"]
    assert gitopsd("sync", other_url, *flags).code == 0
    started = time.time()

    other.commit({"b.yaml": None, "README.md": "empty now\n"})
    assert gitopsd("sync", other_url, *flags).code == 0

    assert deletes(control_plane, started) == ["b"]
    parents = {
        name for name in config_map_names(admin_api, namespace) if name.startswith("gitopsd-")
    }
    assert parents == {"gitopsd-test", "gitopsd-gitopsd-test"}
    assert "a" in config_map_names(admin_api, namespace)
    assert gitopsd("diff", url, *scope(namespace)).code == 0


def test_kubectl_lists_the_members_but_cannot_prune_them(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What docs/cli.md (Ownership) says of kubectl and gitopsd's ApplySet, and no more."""
    synced(gitopsd, git_server, git_repo, namespace, "a", "b")
    applyset = ApplySet.of_source("test", namespace)
    listed = gitopsd.kubectl(
        "get", "configmaps", "-n", namespace, "-l", applyset.selector, "-o", "name"
    )
    assert listed.split() == ["configmap/a", "configmap/b"]

    (tmp_path / "a.yaml").write_text(config_map_files("a")["a.yaml"] or "")
    monkeypatch.setenv("KUBECTL_APPLYSET", "true")
    prune = ["apply", "-n", namespace, "--prune", f"--applyset=configmaps/{applyset.name}"]
    with pytest.raises(AssertionError) as refused:
        gitopsd.kubectl(*prune, "-f", str(tmp_path / "a.yaml"))
    assert 'managed by tooling "gitopsd" instead of "kubectl"' in str(refused.value)
    assert "b" in config_map_names(admin_api, namespace)


def test_two_checkouts_of_one_repository_are_one_source_by_default(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, tmp_path: Path
) -> None:
    """Two CI workspaces: the default name comes from the remote URL and the path in it."""
    git_repo.commit({f"deploy/{n}": text for n, text in config_map_files("a", "b").items()})
    workspaces = [tmp_path / "ci-1", tmp_path / "ci-2"]
    for workspace in workspaces:
        subprocess.run(["git", "clone", "-q", git_repo.bare.as_uri(), str(workspace)], check=True)
    where = ["--namespace", namespace, "--inventory-namespace", namespace]

    first = gitopsd("sync", str(workspaces[0] / "deploy"), *where)
    second = gitopsd("sync", str(workspaces[1] / "deploy"), *where, "--prune")

    assert first.code == 0 and "2 created" in first.out, first.text
    assert second.code == 0, second.text
    assert "0 created, 0 configured" in second.out and "0 pruned" in second.out


def test_an_object_of_another_source_is_refused_naming_that_source(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map_files("a"))
    url = git_server.file_url(git_repo)
    where = ["--allow-insecure-source", "-n", namespace, "--inventory-namespace", namespace]
    assert gitopsd("sync", url, *where, "--name", "first").code == 0
    reason = (
        f"exists and is owned by another target: gitopsd source first (its parent: "
        f"ConfigMap {namespace}/gitopsd-first, gitopsd sync of {url.removesuffix('.git')} "
        f"(paths .) into namespace {namespace}); if this sync is that target, give it --name "
        "first, else remove the object from that source first (rule: not_owned)"
    )

    diff_run = gitopsd("diff", url, *where, "--name", "second")
    refused = gitopsd("sync", url, *where, "--name", "second")

    assert diff_run.code == 1, diff_run.text
    assert f"unowned ConfigMap/{namespace}/a (a.yaml:1)\n  {reason}\n" in diff_run.out
    assert refused.code == CLUSTER_FAILED, refused.text
    assert f"ConfigMap/{namespace}/a (a.yaml:1): {reason}" in refused.err
    assert "--adopt" not in diff_run.out + refused.err
