"""Private snapshots: exactly one commit's files, written from the object store into a
directory nobody else writes to, removed after use."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError
from gitopsd.source.repository import (
    TARGETS,
    ensure_repository,
    fetch_commit,
    guard_os,
    locked,
    recovering,
)
from gitopsd.source.revision import Revision
from gitopsd.source.runner import Runner, open_runner

STALE_SNAPSHOT_SECONDS = 24 * 3600.0
"""Snapshots are removed after use; older ones are leftovers of a killed process."""


@contextmanager
def snapshot(spec: SourceSpec, cache_dir: Path, revision: Revision) -> Iterator[Path]:
    """A private directory holding exactly the files of `revision`, removed on exit.

    Every file is written from the object store, so a missing or truncated object fails
    here (the cache is then cloned again once), never later as a file that is not there.
    """
    if revision.directory is not None:
        yield revision.directory
        return
    runner = open_runner(spec, cache_dir)
    root = guard_os(runner, lambda r: Path(tempfile.mkdtemp(dir=_snapshots(cache_dir))))
    try:
        with locked(runner):
            recovering(runner, lambda r: _materialize(r, revision.sha, root))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        root.with_name(root.name + ".index").unlink(missing_ok=True)


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


def _materialize(runner: Runner, sha: str, root: Path) -> None:
    """Writes every file of commit `sha` into the empty directory `root` from the object
    store, through an index of its own beside it (readers of `root` never see it)."""
    ensure_repository(runner)
    try:
        runner.resolve(sha)
    except SourceError:  # a cache cloned again since the fetch: the commit is fetched anew
        fetch_commit(runner, sha, TARGETS + "snapshot")
    indexed = runner.with_index(root.with_name(root.name + ".index"))
    indexed.run("read-tree", sha)
    indexed.run(f"--work-tree={root}", "checkout-index", "--all", "--force")
