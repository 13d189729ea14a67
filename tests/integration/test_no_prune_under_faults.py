"""With prune on and owned objects present that a prune would take, a source that cannot
be read whole deletes nothing: git unreachable (FA-15), its branch or path deleted, its
history force-pushed to an empty tree (FA-18). What was sent is read from the API server's
audit log, not from what gitopsd says; bad input does the same in test_bad_input.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer, git
from tests.integration.test_prune import PRUNE_BLOCKED
from tests.integration.test_sync import scope

INVALID, SOURCE_FAILED = 2, 3
OWNED = ("a", "b")


def versions(admin_api: Any, namespace: str) -> dict[str, str]:
    """name -> resourceVersion of each owned ConfigMap of `namespace`: equal before and
    after means none was written or deleted (the ApplySet parent records the revision
    that pruned nothing)."""
    items: Any = client.CoreV1Api(admin_api).list_namespaced_config_map(namespace).items
    found = {item.metadata.name: item.metadata.resource_version for item in items}
    return {name: found[name] for name in OWNED if name in found}


def owned_files(directory: str) -> dict[str, str | None]:
    return {
        f"{directory}{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        for name in OWNED
    }


def unreachable(repo: GitRepo) -> Callable[[], None]:
    gone = repo.bare.rename(repo.bare.with_suffix(".gone"))

    def restore() -> None:
        gone.rename(repo.bare)

    return restore


def branch_deleted(repo: GitRepo) -> Callable[[], None]:
    repo.delete_branch("doomed")
    return lambda: None


def path_deleted(repo: GitRepo) -> Callable[[], None]:
    repo.commit({"app": None, "other/README.md": "moved away\n"}, branch="doomed")
    return lambda: None


def emptied_by_force_push(repo: GitRepo) -> Callable[[], None]:
    """The branch replaced by a history of one commit whose path holds no manifest."""
    readme = repo.tree({"README.md": ("100644", repo.blob("nothing here yet\n"))})
    orphan = git("commit-tree", repo.tree({"app": ("040000", readme)}), "-m", "anew", cwd=repo.work)
    repo.force_push(orphan, "doomed")
    return lambda: None


FAULTS: dict[str, tuple[Callable[[GitRepo], Callable[[], None]], int, str]] = {
    "FA-15 git unreachable": (unreachable, SOURCE_FAILED, "failed (unreachable)"),
    "FA-18 branch deleted": (branch_deleted, SOURCE_FAILED, "doomed"),
    "FA-18 path deleted": (path_deleted, INVALID, "path app not found in the revision"),
    "FA-18 force-pushed to an empty tree": (emptied_by_force_push, PRUNE_BLOCKED, "empty_source"),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_source_that_cannot_be_read_whole_prunes_nothing(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    fault: str,
) -> None:
    breaks, code, says = FAULTS[fault]
    git_repo.commit({"README.md": "the default branch\n"})
    git_repo.commit(owned_files("app/"), branch="doomed")
    url = git_server.file_url(git_repo)
    sync = ("sync", url, *scope(namespace), "--ref", "doomed", "--path", "app", "--prune")
    assert gitopsd(*sync).code == 0
    before = versions(admin_api, namespace)
    assert before.keys() == set(OWNED)
    since = time.time()

    restore = breaks(git_repo)
    try:
        run = gitopsd(*sync)
    finally:
        restore()

    assert run.code == code, run.text
    assert says in run.text, run.text
    assert audit.deletes(control_plane, namespace, since) == []
    assert versions(admin_api, namespace) == before
