"""TA-04: the record of cached git repositories gives back what nobody reads, waits for a
git running in it, and keeps everything when the daemon stops."""

from __future__ import annotations

import fcntl
from pathlib import Path

from gitopsd.source.git_cache import GitCache, lock_path


def repository(root: Path, name: str, size: int = 10) -> Path:
    path = root / f"{name}.git"
    path.mkdir(parents=True)
    (path / "pack").write_bytes(b"x" * size)
    return path


def test_ta04_a_repository_nobody_reads_is_removed_once_its_git_ends(tmp_path: Path) -> None:
    cache = GitCache(1000, 1000, [tmp_path])
    read = repository(tmp_path, "read")
    cache.read(read, 1, "team")
    cache.read(read, 2, "team")
    cache.leave(read, 1)
    assert read.is_dir()  # another reader still reads it
    with lock_path(read).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a git runs in it
        cache.leave(read, 2)
        assert read.is_dir()
    cache.sweep()
    assert not read.exists()


def test_ta04_the_repositories_stay_when_the_daemon_stops(tmp_path: Path) -> None:
    cache = GitCache(1000, 1000, [tmp_path])
    read = repository(tmp_path, "read")
    cache.read(read, 1, "team")
    cache.keep()
    cache.leave(read, 1)
    assert read.is_dir()


def test_ta04_a_tenant_gets_the_room_its_bound_leaves_after_unread_ones_go(
    tmp_path: Path,
) -> None:
    left = repository(tmp_path, "left", 600)  # an earlier process's: nobody reads it
    cache = GitCache(900, 300, [tmp_path])
    read = repository(tmp_path, "read", 100)
    cache.read(read, 1, "team")
    cache.charge(read, "team")
    assert cache.room("team") == 200
    assert left.is_dir()  # the total has room for it
    cache.read(repository(tmp_path, "other", 250), 2, "other")
    cache.charge(tmp_path / "other.git", "other")
    assert not left.exists()  # over the total: it went first
    assert "over its bound of 300 (gitCache.maxBytesPerNamespace)" in cache.passed("team", 201)
