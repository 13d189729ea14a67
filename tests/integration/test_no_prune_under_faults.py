"""With prune on and owned objects present that a prune would take, a source that cannot
be read whole deletes nothing: git unreachable (FA-15), its branch or path deleted, its
history force-pushed to an empty tree (FA-18). What was sent is read from the API server's
audit log, not from what gitopsd says; bad input does the same in test_bad_input.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import INVALID, SOURCE_FAILED, scope
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.gitserver import GitRepo, GitServer, git
from tests.harness.manifests import config_map_files
from tests.harness.owned_config_maps import OWNED, owned_files, versions


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
    # the path the source names holds no manifest now: refused before anything is planned
    "FA-18 force-pushed to an empty tree": (
        emptied_by_force_push,
        INVALID,
        "path app: holds no manifest to read",
    ),
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


SMALL_DISK = """
mount -t tmpfs -o size=2m tmpfs "$CACHE"
cp -a "$SEED"/. "$CACHE"
"$@"
echo "first: $?"
find "$CACHE" -type f -printf "left: %P %s\\n"
echo "between: $(date +%s.%N)"
mount -o remount,size=32m "$CACHE"
"$@" > /dev/null
echo "once there is space: $?"
"""
"""Runs the command twice on a cache of its own that starts as a copy of `$SEED`: on 2 MiB,
then on 32 MiB."""


@pytest.mark.case("FA-22")
def test_fa22_a_full_disk_under_the_cache_dir_fails_the_source_and_applies_nothing(
    control_plane: ControlPlane,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The cache on a 2 MiB filesystem of its own (a private mount namespace), holding a
    revision read but never applied (a diff of it ran), and a newer revision whose pack is
    larger: the fetch fails for want of space, and the failed run sends no write at all
    (the audit log, by the run's own user, dry-runs included): nothing rendered from what
    the fetch wrote, nor from the revision the cache held; nothing applied or pruned. No
    partial pack is left to keep the disk full, and the same sync succeeds once there is
    space."""
    seeding = dataclasses.replace(gitopsd, cache=tmp_path / "seed")  # this repository's only
    git_repo.commit(owned_files(""))
    url = git_server.file_url(git_repo)
    assert seeding("sync", url, *scope(namespace), "--prune").code == 0
    git_repo.commit(config_map_files("read"))
    assert seeding("diff", url, *scope(namespace)).code == 1  # "read" would be created
    before, since = versions(admin_api, namespace), time.time()
    noise = {f"assets/noise{i}.bin": os.urandom(2**20) for i in range(3)}  # incompressible
    git_repo.commit({"a.yaml": None, **noise, **config_map_files("new")})
    small = tmp_path / "small"
    small.mkdir()
    sync = [sys.executable, "-m", "gitopsd", "sync", url, *scope(namespace), "--prune"]
    sync += ["--cache-dir", str(small), "--kubeconfig", str(control_plane.audited_kubeconfig)]

    done = subprocess.run(
        ["unshare", "--map-root-user", "--mount", "sh", "-c", SMALL_DISK, "sh", *sync],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "CACHE": str(small), "SEED": str(seeding.cache)},
    )

    [between] = [float(line.split()[1]) for line in done.stdout.splitlines() if "between" in line]
    failed_run = [
        w for w in audit.writes(control_plane, AUDITED_USER, since) if w.received < between
    ]
    assert failed_run == []
    assert f"first: {SOURCE_FAILED}" in done.stdout, done.stdout + done.stderr
    assert "failed (nospace)" in done.stderr and "No space left on device" in done.stderr
    left = [line.split() for line in done.stdout.splitlines() if line.startswith("left: ")]
    assert not [name for _, name, _ in left if "tmp_" in name], left  # no partial pack
    assert sum(int(size) for _, _, size in left) < 64 * 1024, left
    assert "once there is space: 0" in done.stdout, done.stdout + done.stderr
    assert {"new", "read"} <= config_map_names(admin_api, namespace)
    assert versions(admin_api, namespace) == {"b": before["b"]}  # the next run pruned a
