"""A git revision is read from the object store by blob id (re-rendering reads only
changed files). Real git, a real repository served over file://; what a read cost is seen
through `GitTree.blobs_read` and `ParseCache.parses`, and its result is compared with a cold
read of the same revision."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import git
import pytest

from gitopsd import manifests, source
from gitopsd.config import Limits, SourceSpec
from gitopsd.errors import ManifestError
from gitopsd.objects import Manifest
from tests.harness.checkouts import cached_repository, file_spec, tree
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_without_data

APPS = {f"apps/app-{n}.yaml": config_map_without_data(f"app-{n}") for n in range(30)}
DEFAULT_LIMITS = Limits()


def read(
    spec: SourceSpec,
    cache: Path,
    cache_of_parses: manifests.ParseCache,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[list[Manifest], int]:
    """The manifests of the revision the ref names now, and how many blobs that read."""
    revision = source.fetch(spec, cache)
    with source.tree(spec, cache, revision) as files:
        assert isinstance(files, source.GitTree)
        found = manifests.load(files, ["."], cache=cache_of_parses, limits=limits)
        return found, files.blobs_read


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_a_new_revision_reads_only_its_changed_file(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit(APPS)
    spec = file_spec(git_server, git_repo)
    parses = manifests.ParseCache()
    _, cold_reads = read(spec, cache, parses)
    git_repo.commit(
        {"apps/app-7.yaml": config_map_without_data("app-7") + "data: {changed: 'yes'}\n"}
    )

    found, blobs_read = read(spec, cache, parses)

    assert (cold_reads, blobs_read, parses.parses) == (30, 1, 31)
    assert found == read(spec, cache, manifests.ParseCache())[0]  # as a cold read finds it
    assert {m.key.name: m.body.get("data") for m in found}["app-7"] == {"changed": "yes"}
    assert not (cache / "snapshots").exists()  # nothing was written out


def test_sources_of_one_repository_read_a_commit_they_share_with_one_git(
    git_server: GitServer, git_repo: GitRepo, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sources that follow one ref read its new commit at the same moment: what the first
    listed and read, the next (a parse cache of its own) takes without running git."""
    git_repo.commit(APPS)
    spec = file_spec(git_server, git_repo)
    revision = source.fetch(spec, cache)
    first = read_tree(spec, cache, revision)
    gits: list[Any] = []
    execute = git.Git.execute

    def counted(self: git.Git, command: Any, **options: Any) -> Any:
        gits.append(command)
        return execute(self, command, **options)

    monkeypatch.setattr(git.Git, "execute", counted)
    second = read_tree(spec, cache, revision)

    assert (first[1], second, gits) == (30, (first[0], 0), [])


def read_tree(
    spec: SourceSpec, cache: Path, revision: source.Revision
) -> tuple[list[Manifest], int]:
    """`revision`'s manifests, read as a source of its own would, and the blobs read."""
    with source.tree(spec, cache, revision) as files:
        assert isinstance(files, source.GitTree)
        return manifests.load(files, ["."], cache=manifests.ParseCache()), files.blobs_read


def test_the_limits_count_files_that_were_not_read_again(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit(APPS)
    spec = file_spec(git_server, git_repo)
    parses = manifests.ParseCache()
    limits = Limits(max_revision_bytes=sum(map(len, APPS.values())) + 10, max_documents=31)
    read(spec, cache, parses, limits)

    git_repo.commit({"late.yaml": config_map_without_data("late")})
    with pytest.raises(ManifestError) as over_bytes:
        read(spec, cache, parses, limits)
    git_repo.commit(
        {"late.yaml": config_map_without_data("x") + "---\n" + config_map_without_data("y")}
    )
    with pytest.raises(ManifestError) as over_documents:
        read(spec, cache, parses, dataclasses.replace(limits, max_revision_bytes=64 << 20))

    assert str(over_bytes.value).startswith("late.yaml: the revision's manifests reach")
    assert str(over_documents.value).startswith("late.yaml:6: more than 31 YAML documents")


def test_an_old_revision_is_read_exactly_after_the_ref_moved_and_the_cache_was_recloned(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit({"a.yaml": config_map_without_data("old")})
    spec = file_spec(git_server, git_repo)
    old = source.fetch(spec, cache)
    git_repo.commit(
        {"a.yaml": config_map_without_data("new"), "b.yaml": config_map_without_data("b")}
    )
    source.fetch(spec, cache)
    shutil.rmtree(cached_repository(cache))  # as another process recovering would

    with source.tree(spec, cache, old) as files:
        found = manifests.load(files, ["."])

    assert [manifest.key.name for manifest in found] == ["old"]


def test_missing_objects_between_fetch_and_read_are_fetched_again(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit(APPS)
    spec = file_spec(git_server, git_repo)
    revision = source.fetch(spec, cache)
    for entry in (cached_repository(cache) / "objects").iterdir():
        shutil.rmtree(entry)

    with source.tree(spec, cache, revision) as files:
        found = manifests.load(files, ["."])

    assert sorted(manifest.key.name for manifest in found) == sorted(f"app-{n}" for n in range(30))


def test_a_symlink_in_the_revision_is_refused_and_never_read(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit(APPS)
    git_repo.commit_symlink("apps/link.yaml", "/etc/passwd")
    spec = file_spec(git_server, git_repo)

    with pytest.raises(ManifestError) as refused:
        read(spec, cache, manifests.ParseCache())

    assert str(refused.value) == "apps/link.yaml: is a symlink; gitopsd never follows symlinks"


def test_only_what_kustomize_reaches_is_written_out_and_removed_after(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit(
        {
            **APPS,
            "app/kustomization.yaml": "resources: [../base]\n",
            "base/kustomization.yaml": "resources: [cm.yaml]\n",
            "base/cm.yaml": config_map_without_data("base"),
        }
    )
    spec = file_spec(git_server, git_repo)
    revision = source.fetch(spec, cache)

    with source.tree(spec, cache, revision) as files:
        assert isinstance(files, source.GitTree)
        root = files.materialized(["app"])
        assert set(tree(root)) == {"app/kustomization.yaml"}
        assert files.materialized(["base", "app"]) == root
        assert set(tree(root)) == {"app/kustomization.yaml", "base/kustomization.yaml"} | {
            "base/cm.yaml"
        }
        assert files.blobs_read == 3  # each file written once, from its blob
        assert files.materialized(["app", "base"]) == root
        assert files.blobs_read == 3
    assert not root.exists()
    assert list((cache / "snapshots").iterdir()) == []
