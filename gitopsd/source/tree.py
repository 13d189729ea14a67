"""Reading exactly one git revision: its files from the object store, by blob id.

A `GitTree` answers the manifest reader from the revision's listing (modes, blob ids and
sizes, taken when it was fetched), so walking it and sizing it writes and reads nothing.
Contents come from the object store: all the files the reader asks for in one `git
cat-file --batch`, under the repository's lock. A file whose parse the reader has cached
is never read at all, so a new revision costs work only for the files that changed.

Only kustomize needs files on disk: what it may reach is checked out into a private
snapshot (nobody else writes to it), removed when the tree is closed. Blob ids and the
commit's tree never change, so nothing read can come from another revision.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.source.repository import ensure_commit, locked, read_blobs, recovering
from gitopsd.source.revision import Revision
from gitopsd.source.runner import Runner, open_runner
from gitopsd.source.snapshots import new_snapshot, remove_snapshot, write_files


@contextmanager
def tree(spec: SourceSpec, cache_dir: Path, revision: Revision) -> Iterator[Path | GitTree]:
    """The files of `revision`: a git revision's from the object store, a local directory
    itself (read in place). What the tree wrote out is removed on exit."""
    if revision.directory is not None:
        yield revision.directory
        return
    files = GitTree(open_runner(spec, cache_dir), cache_dir, revision)
    try:
        yield files
    finally:
        files.close()


@contextmanager
def snapshot(spec: SourceSpec, cache_dir: Path, revision: Revision) -> Iterator[Path]:
    """A private directory holding exactly the files of `revision`, removed on exit.

    Every file is written from the object store, so a missing or truncated object fails
    here (the cache is then cloned again once), never later as a file that is not there.
    """
    with tree(spec, cache_dir, revision) as files:
        yield files if isinstance(files, Path) else files.materialized(["."])


class GitTree:
    """A git revision's files (a `gitopsd.manifests.Tree`), read from the object store."""

    def __init__(self, runner: Runner, cache_dir: Path, revision: Revision) -> None:
        self._runner, self._cache_dir, self._revision = runner, cache_dir, revision
        self._prefetched: dict[str, bytes] = {}
        self._snapshot: Path | None = None
        self._indexed = False  # the snapshot's index holds the commit's tree
        self._written: set[str] = set()
        self.blobs_read = 0
        """Blobs read from the object store: the work this revision cost."""

    def mode(self, rel: str) -> int | None:
        entry = self._revision.entries.get(rel)
        if entry is not None:
            return entry.mode
        return stat.S_IFDIR | 0o755 if rel in self._directories else None

    def names(self, rel: str) -> list[str]:
        return self._directories[rel]

    def size(self, rel: str) -> int:
        return self._revision.entries[rel].size

    def content_id(self, rel: str) -> str | None:
        return self._revision.entries[rel].blob

    def prefetch(self, rels: Iterable[str]) -> None:
        """Reads every file in `rels` now, in one go."""
        self._prefetched = self._read(list(rels))

    def read(self, rel: str, limit: int) -> bytes:
        data = self._prefetched.pop(rel, None)
        if data is None:
            data = self._read([rel])[rel]
        return data[: limit + 1]

    def materialized(self, rels: Sequence[str]) -> Path:
        """The tree's private snapshot, holding (at least) the files under each of `rels`."""
        if self._snapshot is None:
            self._snapshot = new_snapshot(self._runner, self._cache_dir)
        root, sha, fresh = self._snapshot, self._revision.sha, not self._indexed
        paths = [path for path in self._files_under(rels) if path not in self._written]
        if paths:
            with locked(self._runner):
                recovering(self._runner, lambda r: _write(r, sha, root, paths, fresh))
            self._indexed = True
            self._written.update(paths)
        return root

    def close(self) -> None:
        self._prefetched = {}
        if self._snapshot is not None:
            remove_snapshot(self._snapshot)

    @cached_property
    def _directories(self) -> dict[str, list[str]]:
        """Each directory's names, sorted, from the paths of the listing ("." is the root)."""
        children: dict[str, set[str]] = {".": set()}
        for path in self._revision.entries:
            parent = "."
            for name in path.split("/"):
                children.setdefault(parent, set()).add(name)
                parent = name if parent == "." else f"{parent}/{name}"
        return {directory: sorted(names) for directory, names in children.items()}

    def _files_under(self, rels: Sequence[str]) -> list[str]:
        """The files that are `rels` or lie in directories among them."""
        if "." in rels:
            return list(self._revision.entries)
        prefixes = tuple(f"{rel}/" for rel in rels)
        wanted = set(rels)
        return [
            path for path in self._revision.entries if path in wanted or path.startswith(prefixes)
        ]

    def _read(self, rels: list[str]) -> dict[str, bytes]:
        if not rels:
            return {}
        blob_of = {rel: self._revision.entries[rel].blob for rel in rels}
        blobs = sorted(set(blob_of.values()))
        with locked(self._runner):
            contents = recovering(self._runner, lambda r: read_blobs(r, self._revision.sha, blobs))
        self.blobs_read += len(blobs)
        return {rel: contents[blob] for rel, blob in blob_of.items()}


def _write(runner: Runner, sha: str, root: Path, paths: list[str], fresh: bool) -> None:
    ensure_commit(runner, sha)
    write_files(runner, sha, root, paths, fresh)
