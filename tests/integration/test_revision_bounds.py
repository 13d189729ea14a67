"""What a revision costs is bounded before it is spent (BI-07; docs/ARCHITECTURE.md, Trust
boundaries).

Hostile repositories, each a few KiB of pack: nested trees naming four million
paths, one 64 MiB blob at 32 paths beside a kustomization, and a chain of 1,500
kustomizations. Each is refused naming its limit (key and flag), by `gitopsd validate` and
by a daemon that holds them beside a good source: its memory stays bounded, and the good
source keeps syncing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.cluster_reads import config_map_data_value
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name
from tests.harness.manifests import config_map_with_value
from tests.harness.memory import run_measured
from tests.harness.waiting import wait_for

PEAK_RSS_MIB = 300
DIRECTORY, FILE = "040000", "100644"


def nested_paths(repo: GitRepo) -> str:
    """A tree of 2**22 files (4,194,304), from 22 tree objects and one blob."""
    blob = repo.blob(config_map_with_value("x"))
    tree = repo.tree({"a.yaml": (FILE, blob), "b.yaml": (FILE, blob)})
    for _ in range(21):
        tree = repo.tree({"a": (DIRECTORY, tree), "b": (DIRECTORY, tree)})
    return tree


def inflating(repo: GitRepo) -> str:
    """A kustomization beside 32 paths of one 64 MiB blob: 2 GiB of files for kustomize."""
    big = repo.blob("\0" * (64 * 1024 * 1024))
    data = repo.tree({f"f{n}.bin": (FILE, big) for n in range(32)})
    kustomization = repo.blob("configMapGenerator:\n- name: big\n  files: [data/f0.bin]\n")
    return repo.tree({"kustomization.yaml": (FILE, kustomization), "data": (DIRECTORY, data)})


def chain(repo: GitRepo) -> str:
    """A kustomization whose base has a base, and so on, 1,500 deep (app, then k1..k1499)."""
    names = ["app", *(f"k{n}" for n in range(1, 1500))]
    blobs = repo.blobs([f"resources: [../k{n}]\n" for n in range(1, 1501)])
    trees = repo.trees([{"kustomization.yaml": (FILE, blob)} for blob in blobs])
    return repo.tree({name: (DIRECTORY, tree) for name, tree in zip(names, trees, strict=True)})


BOMBS: dict[str, tuple[Callable[[GitRepo], str], bool, str]] = {
    # name: (its tree, whether it is the whole root, the limit it meets)
    "paths": (nested_paths, False, "(--max-entries, limits.maxEntries)"),
    "inflating": (
        inflating,
        False,
        "(--max-revision-bytes, limits.maxRevisionBytes); none was written",
    ),
    "chain": (chain, True, "reaches more than 200 kustomizations in one render"),
}


def committed_bomb(git_server: GitServer, name: str) -> str:
    """A repository whose tip holds bomb `name` under app/; its file:// URL."""
    repo = git_server.create_repo(unique_name(f"bomb-{name}"))
    repo.commit({"README.md": "before the bomb\n"})
    build, whole, _ = BOMBS[name]
    bomb = build(repo)
    readme = repo.blob("the bomb\n")
    root = bomb if whole else repo.tree({"app": (DIRECTORY, bomb), "README.md": (FILE, readme)})
    repo.push_tree(root)
    return git_server.file_url(repo)


@pytest.mark.case("BI-07")
@pytest.mark.parametrize("name", BOMBS)
def test_bi07_a_revision_bomb_is_refused_by_validate_naming_its_limit(
    git_server: GitServer, tmp_path: Path, binaries: Any, name: str
) -> None:
    url = committed_bomb(git_server, name)
    command = [sys.executable, "-m", "gitopsd", "validate", url, "--path", "app"]
    command += ["--allow-insecure-source", "--cache-dir", str(tmp_path / "cache")]

    code, err, peak_mib = run_measured(command, tmp_path)

    assert code == 2, err
    assert BOMBS[name][2] in err, err
    assert peak_mib < PEAK_RSS_MIB


@pytest.mark.case("BI-07")
def test_bi07_revision_bombs_never_exhaust_a_daemon_whose_other_source_keeps_syncing(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit({"app/alive.yaml": config_map_with_value("alive")})
    good = daemons.source(git_server.file_url(git_repo), name="good", paths=["app"])
    bombs = [
        daemons.source(committed_bomb(git_server, name), name=f"bomb-{name}", paths=["app"])
        for name in BOMBS
    ]
    daemon = daemons.start_with([good, *bombs], "daemon").start()
    wait_for(
        lambda: config_map_data_value(admin_api, namespace, "alive") == "one", "the good source"
    )

    for name in BOMBS:
        daemon.wait_value(
            "gitopsd_errors_total",
            lambda v: v >= 1,
            f"bomb {name} refused",
            120,
            source=f"bomb-{name}",
            stage="manifests",
            reason="size_limit",
        )
    logged = [line["message"] for line in daemon.log_lines() if line.get("reason") == "size_limit"]
    for _, _, limit in BOMBS.values():
        assert any(limit in message for message in logged), (limit, logged)

    git_repo.commit({"app/alive.yaml": config_map_with_value("alive", "two")})
    wait_for(
        lambda: config_map_data_value(admin_api, namespace, "alive") == "two", "the next commit"
    )
    assert daemon.peak_rss_mib() < PEAK_RSS_MIB
    core: Any = client.CoreV1Api(admin_api)
    names = {item.metadata.name for item in core.list_namespaced_config_map(namespace).items}
    assert "x" not in names and "big" not in names


def test_only_the_trees_under_the_paths_are_listed(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    """Four million paths beside the source's path cost nothing: they are never listed."""
    git_repo.commit({"app/a.yaml": config_map_with_value("a")})
    app = git_repo.blob(config_map_with_value("a"))
    root = git_repo.tree(
        {
            "app": (DIRECTORY, git_repo.tree({"a.yaml": (FILE, app)})),
            "elsewhere": (DIRECTORY, nested_paths(git_repo)),
        }
    )
    git_repo.push_tree(root)
    command = [sys.executable, "-m", "gitopsd", "validate", git_server.file_url(git_repo)]
    command += ["--path", "app", "--allow-insecure-source", "--cache-dir", str(tmp_path / "c")]

    code, err, peak_mib = run_measured(command, tmp_path)

    assert code == 0, err
    assert peak_mib < PEAK_RSS_MIB
