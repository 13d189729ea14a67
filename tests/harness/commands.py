"""gitopsd's commands as the cluster tests run them, each test's objects and ApplySet parent
in its own namespace, and the exit codes they end with, as a user's script reads them:
written out, not gitopsd.errors.ExitCode, so that a renumbering fails the tests."""

from __future__ import annotations

from typing import Any

from tests.harness.cli import Gitopsd, Run
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files

DRIFT = 1
INVALID = 2
SOURCE_FAILED = 3
CLUSTER_FAILED = 4
PRUNE_BLOCKED = 5
UNHEALTHY = 6


def scope(namespace: str) -> list[str]:
    """Flags that put a test's objects and its ApplySet parent in its own namespace."""
    return [
        "--allow-insecure-source",
        "--namespace",
        namespace,
        "--inventory-namespace",
        namespace,
        "--name",
        "test",
    ]


def drift_of(gitopsd: Gitopsd, url: str, namespace: str) -> list[dict[str, Any]]:
    run = gitopsd("diff", url, *scope(namespace), "-o", "json")
    assert run.code in (0, 1), run.text
    drift: list[dict[str, Any]] = run.document("DiffResult")["drift"]
    assert run.code == (1 if drift else 0)
    return drift


def sync(gitopsd: Gitopsd, url: str, namespace: str, *flags: str) -> Run:
    return gitopsd("sync", url, *scope(namespace), *flags)


def synced(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, *names: str
) -> str:
    git_repo.commit(config_map_files(*names))
    url = git_server.file_url(git_repo)
    run = gitopsd("sync", url, *scope(namespace), "--prune")
    assert run.code == 0, run.text
    return url
