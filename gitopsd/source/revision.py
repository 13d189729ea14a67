"""A revision: one state of a source, a commit of a git repository or a local directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.policy import check_url, mask_url
from gitopsd.source.repository import ensure_repository, fetch_ref, locked, recovering
from gitopsd.source.runner import Runner, open_runner


@dataclass(frozen=True)
class Entry:
    """A file of a commit's tree, as git lists it."""

    mode: int
    """File mode bits as `stat` spells them: a regular file (0o100644, 0o100755) or a
    symlink (0o120000)."""
    blob: str
    """Git blob sha: the same content has the same sha in every revision."""
    size: int
    """Bytes of the content, known without reading it."""


@dataclass(frozen=True)
class Revision:
    """One state of a source: a commit of a git repository, or a local directory."""

    sha: str
    """Commit sha; "" for a local directory."""
    commit_time: float | None
    """Unix seconds of the commit (committer date); None for a directory."""
    url: str
    """Where it came from, masked: never carries a credential."""
    entries: Mapping[str, Entry] = field(default_factory=dict)
    """Posix path relative to the tree's root -> its file; empty for a directory."""
    directory: Path | None = None
    """A local source's directory, read in place; None for git (see `tree`)."""

    @cached_property
    def blob_ids(self) -> Mapping[str, str]:
        """Posix path relative to the tree's root -> git blob sha; empty for a directory."""
        return {path: entry.blob for path, entry in self.entries.items()}


def read_directory(path: Path) -> Revision:
    """A local directory as a source: no git, no cache, read in place."""
    root = path.resolve()
    if not root.is_dir():
        raise SourceError(f"source directory {path} does not exist", SourceReason.REF_MISSING)
    return Revision(sha="", commit_time=None, url=str(root), directory=root)


def fetch(spec: SourceSpec, cache_dir: Path) -> Revision:
    """Fetches the commit the ref of `spec` names into the cache and describes it.

    A cache git cannot use is deleted and cloned again once. Raises ConfigError for a
    refused source, SourceError for everything else.
    """
    check_url(spec)
    runner = open_runner(spec, cache_dir)
    with locked(runner):
        return recovering(runner, _fetched)


def _fetched(runner: Runner) -> Revision:
    ensure_repository(runner)
    return _describe(runner, fetch_ref(runner))


def _describe(runner: Runner, sha: str) -> Revision:
    listing = runner.run_bytes("ls-tree", "-r", "-l", "-z", "--full-tree", sha)
    commit_time = float(runner.run("show", "--no-patch", "--format=%ct", sha))
    return Revision(
        sha=sha,
        commit_time=commit_time,
        url=mask_url(runner.spec.url),
        entries=_entries(listing),
    )


def _entries(listing: bytes) -> dict[str, Entry]:
    """Parses `ls-tree -l -z` lines `<mode> <type> <sha> <size>\\t<path>` (the size padded
    with spaces); submodule links are skipped."""
    entries: dict[str, Entry] = {}
    for line in filter(None, listing.split(b"\0")):
        info, _, path = line.partition(b"\t")
        mode, kind, blob, size = info.split()
        if kind == b"blob":
            entries[os.fsdecode(path)] = Entry(int(mode, 8), blob.decode(), int(size))
    return entries
