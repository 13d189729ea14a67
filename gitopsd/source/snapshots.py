"""Private snapshots: files of exactly one commit, written from the object store into a
directory nobody else writes to, removed after use."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable
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
    index_of(root).unlink(missing_ok=True)


def index_of(root: Path) -> Path:
    """The snapshot's own index file, beside it so that readers of `root` never see it."""
    return root.with_name(root.name + ".index")


def write_files(runner: Runner, sha: str, root: Path, paths: Iterable[str], fresh: bool) -> None:
    """Writes files `paths` of commit `sha` into `root` from the object store. A `fresh`
    snapshot's index is read from the commit's tree first; later calls add to it."""
    indexed = runner.with_index(index_of(root))
    if fresh:
        indexed.run("read-tree", sha)
    with tempfile.TemporaryFile() as listing:
        listing.write(b"".join(os.fsencode(path) + b"\0" for path in paths))
        listing.seek(0)
        work_tree = f"--work-tree={root}"
        indexed.run_bytes(work_tree, "checkout-index", "--force", "-z", "--stdin", stdin=listing)


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
