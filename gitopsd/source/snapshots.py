"""Private snapshots: files of exactly one commit, their blobs' bytes written as they are
into a directory nobody else writes to, removed after use."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from gitopsd.source.repository import guard_os
from gitopsd.source.runner import Runner

STALE_SNAPSHOT_SECONDS = 24 * 3600.0
"""Snapshots are removed after use; older ones are leftovers of a killed process."""


def new_snapshot(runner: Runner, cache_dir: Path) -> Path:
    """A fresh empty private directory for one snapshot."""
    return guard_os(runner, lambda r: Path(tempfile.mkdtemp(dir=_snapshots(cache_dir))))


def remove_snapshot(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def write_files(runner: Runner, root: Path, contents: Mapping[str, bytes]) -> None:
    """Writes each file (root-relative posix path -> its bytes) under `root`, as regular files
    only this user may read: never through a link, never over an existing file."""
    guard_os(runner, lambda r: _write_all(root, contents))


def _write_all(root: Path, contents: Mapping[str, bytes]) -> None:
    for rel, data in contents.items():
        path = root / rel
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(path, flags, 0o600), "wb") as file:
            file.write(data)


def _snapshots(cache_dir: Path) -> Path:
    """The parent of all snapshots, after removing leftovers of killed processes."""
    parent = cache_dir / "snapshots"
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    cutoff = time.time() - STALE_SNAPSHOT_SECONDS
    for entry in parent.iterdir():
        try:
            stale = entry.lstat().st_mtime < cutoff
        except FileNotFoundError:
            continue  # another process cleaned it up first
        if stale and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif stale:
            entry.unlink(missing_ok=True)
    return parent
