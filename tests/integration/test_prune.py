"""Prune deletes only what this source owns and git dropped, and only past every guard."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.harness import contract
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import PRUNE_BLOCKED, drift_of, scope, synced
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files


def test_an_object_removed_from_git_is_pruned_only_with_prune(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    git_repo.commit({"d.yaml": None})

    [extraneous] = drift_of(gitopsd, url, namespace)
    assert (contract.named(extraneous["object"]), extraneous["state"]) == (
        f"ConfigMap/{namespace}/d",
        "extraneous",
    )
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    assert "d" in config_map_names(admin_api, namespace)  # no --prune, no delete

    pruned = gitopsd("sync", url, *scope(namespace), "--prune")
    assert pruned.code == 0, pruned.text
    assert f"pruned     ConfigMap/{namespace}/d" in pruned.out
    assert {"a", "b", "c"} <= config_map_names(admin_api, namespace)
    assert "d" not in config_map_names(admin_api, namespace)
    assert drift_of(gitopsd, url, namespace) == []


def test_an_empty_source_prunes_nothing_unless_allowed(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a")
    git_repo.commit({"a.yaml": None, "README.md": "nothing here\n"})

    refused = gitopsd("sync", url, *scope(namespace), "--prune")
    assert refused.code == PRUNE_BLOCKED
    assert f"ConfigMap/{namespace}/a  (prune refused: empty_source)" in refused.out
    assert "a" in config_map_names(admin_api, namespace)

    allowed = gitopsd("sync", url, *scope(namespace), "--prune", "--allow-empty")
    assert allowed.code == 0, allowed.text
    assert "a" not in config_map_names(admin_api, namespace)


@pytest.mark.case("LD-04")
def test_pruning_beyond_the_budget_is_refused_unless_allowed(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    names = [f"cm{i}" for i in range(8)]
    url = synced(gitopsd, git_server, git_repo, namespace, *names)
    git_repo.commit(dict.fromkeys([f"{name}.yaml" for name in names[:3]]))  # 3 of 8 > 25%

    refused = gitopsd("sync", url, *scope(namespace), "--prune")
    assert refused.code == PRUNE_BLOCKED
    assert refused.out.count("(prune refused: threshold)") == 3
    assert set(names) <= config_map_names(admin_api, namespace)

    widened = gitopsd("sync", url, *scope(namespace), "--prune", "--prune-budget", "40")
    assert widened.code == 0, widened.text
    assert config_map_names(admin_api, namespace).isdisjoint(names[:3])


def test_mass_prune_is_allowed_with_its_flag(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c")
    git_repo.commit({"a.yaml": None, "b.yaml": None})
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == PRUNE_BLOCKED
    run = gitopsd("sync", url, *scope(namespace), "--prune", "--allow-mass-prune")
    assert run.code == 0, run.text
    assert config_map_names(admin_api, namespace) & {"a", "b", "c"} == {"c"}


def test_namespaces_and_opted_out_objects_are_never_pruned(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    extra = f"{namespace}-extra"
    git_repo.commit(
        {
            **config_map_files("keep", "a", "b", "c", "d", "e", "f", "g"),
            "ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {extra}\n",
        }
    )
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    gitopsd.kubectl("annotate", "configmap/keep", "gitopsd.io/prune=disabled", "-n", namespace)
    git_repo.commit({"keep.yaml": None, "ns.yaml": None})

    refused = gitopsd("sync", url, *scope(namespace), "--prune")
    assert refused.code == PRUNE_BLOCKED
    assert f"ConfigMap/{namespace}/keep  (prune refused: disabled)" in refused.out
    assert f"Namespace/{extra}  (prune refused: protected)" in refused.out
    assert "keep" in config_map_names(admin_api, namespace)
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespace(extra).status.phase == "Active"

    opted_in = gitopsd("sync", url, *scope(namespace), "--prune", "--prune-protected")
    assert opted_in.code == PRUNE_BLOCKED  # the annotation still holds
    assert core.read_namespace(extra).status.phase == "Terminating"
    assert "keep" in config_map_names(admin_api, namespace)


def test_a_dry_run_sync_changes_nothing(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    url = synced(gitopsd, git_server, git_repo, namespace, "a", "b", "c", "d")
    git_repo.commit({"d.yaml": None, **config_map_files("e")})

    run = gitopsd("sync", url, *scope(namespace), "--prune", "--dry-run")
    assert run.code == 0, run.text
    assert f"created    ConfigMap/{namespace}/e" in run.out
    assert f"pruned     ConfigMap/{namespace}/d  (dry run)" in run.out
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c", "d"}
    assert "e" not in config_map_names(admin_api, namespace)
