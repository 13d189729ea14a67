"""A revision: one state of a source, a commit of a git repository or a local directory."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source import verification
from gitopsd.source.policy import check_url, mask_url
from gitopsd.source.repository import ensure_repository, fetch_ref, locked, recovering
from gitopsd.source.runner import Runner, open_runner


@dataclass(frozen=True)
class Revision:
    """One state of a source: a commit of a git repository, or a local directory."""

    sha: str
    """Commit sha; "" for a local directory."""
    commit_time: float | None
    """Unix seconds of the commit (committer date); None for a directory."""
    url: str
    """Where it came from, masked: never carries a credential."""
    directory: Path | None = None
    """A local source's directory, read in place; None for git (its files: see `tree`)."""


def read_directory(path: Path) -> Revision:
    """A local directory as a source: no git, no cache, read in place."""
    root = path.resolve()
    if root.is_file():
        raise SourceError(
            f"source {path} is a file: give the directory that holds it, and --path to read "
            "only this file",
            SourceReason.REF_MISSING,
        )
    if not root.is_dir():
        raise SourceError(f"source directory {path} does not exist", SourceReason.REF_MISSING)
    return Revision(sha="", commit_time=None, url=str(root), directory=root)


class Shared(Protocol):
    """Fetches of one ref shared by several sources (see `sharing`)."""

    def recent(self) -> Revision | None:
        """A commit fetched recently enough to be used without fetching."""

    def fetched(self, revision: Revision, started: float) -> None:
        """Hears of a fetch begun at `started` (time.monotonic()) that found `revision`."""


def fetch(spec: SourceSpec, cache_dir: Path, shared: Shared | None = None) -> Revision:
    """Fetches the commit the ref of `spec` names into the cache and describes it (its
    files are listed only when they are read: see `tree`); with `shared`, a commit fetched
    recently by another source is used instead (asked under the repository's lock, so
    those that waited for one fetch use it). With keys to verify against, it is returned
    only once its signature verified (`verification`).

    A cache git cannot use is deleted and cloned again once. Raises ConfigError for a
    refused source, SourceError for everything else.
    """
    check_url(spec)
    runner = open_runner(spec, cache_dir)
    keys = verification.keys_of(runner) if spec.verify.enabled else None
    with locked(runner):
        revision = (shared.recent() if shared else None) or _fetch(runner, shared)
        check = None if keys is None else verification.needed(runner, revision.sha, keys)
    if check is not None:
        verification.verify(runner, check, cache_dir)
    return revision


def _fetch(runner: Runner, shared: Shared | None) -> Revision:
    started = time.monotonic()
    revision = recovering(runner, _fetched)
    if shared:
        shared.fetched(revision, started)
    return revision


def _fetched(runner: Runner) -> Revision:
    ensure_repository(runner)
    return _describe(runner, fetch_ref(runner))


def _describe(runner: Runner, sha: str) -> Revision:
    # `log -1 --no-walk` reads the commit object only (`show` walks its whole tree)
    commit_time = float(runner.run("log", "-1", "--no-walk", "--format=%ct", sha))
    return Revision(sha=sha, commit_time=commit_time, url=mask_url(runner.spec.url))
