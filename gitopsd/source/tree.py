"""Reading exactly one git revision: its files from the object store, by blob id.

A `GitTree` answers the manifest reader from a listing of the revision's tree (modes, object
ids and sizes, `listing`): first the source's paths, then whatever else a kustomization
reaches, each listed when first asked for, all within the revision's entry limit. Walking
and sizing it reads no file. Contents come from the object store: all the files the reader
asks for in one `git cat-file --batch`, under the repository's lock. A file whose parse the
reader has cached is never read at all, so a new revision costs work only for the files
that changed; and what another source of the same cached repository listed and read of
the commit lately is taken from it (`reads`), without git.

Only kustomize needs files on disk: what it may reach is written into a private snapshot
(nobody else writes to it), removed when the tree is closed. The bytes written are the
blobs' own, straight from the object store: no checkout, so no `.gitattributes` filter,
encoding or line-ending conversion changes what was checked, and no symlink is written.
Their sizes, known from the listing, are added up against the revision's byte limit
before anything is written. Blob ids and the commit's tree never change, so nothing read
can come from another revision.
"""

from __future__ import annotations

import stat
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gitopsd.config import SourceSpec, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.source.listing import WHOLE, Entry, children, covers, list_names, list_paths
from gitopsd.source.reads import RECENT_READS
from gitopsd.source.repository import ensure_commit, locked, read_blobs, recovering
from gitopsd.source.revision import Revision
from gitopsd.source.runner import Runner, open_runner
from gitopsd.source.snapshots import new_snapshot, remove_snapshot, write_files

DIRECTORY = Entry(stat.S_IFDIR | 0o755, "", 0)


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
        yield files if isinstance(files, Path) else files.materialized([WHOLE])


class GitTree:
    """A git revision's files (a `gitopsd.manifests.Tree`), read from the object store.
    The source's paths are listed at once; any other path when it is first asked for."""

    def __init__(self, runner: Runner, cache_dir: Path, revision: Revision) -> None:
        self._runner, self._cache_dir, self._revision = runner, cache_dir, revision
        self._limits = runner.spec.limits
        self._entries: dict[str, Entry] = {}
        self._listed: list[str] = []
        self._children: dict[str, list[str]] | None = None
        self._prefetched: dict[str, bytes] = {}
        self._snapshot: Path | None = None
        self._written: set[str] = set()
        self._written_bytes = 0
        self.blobs_read = 0
        """Blobs read from the object store: the work this revision cost."""
        self._list(runner.spec.paths)

    def mode(self, rel: str) -> int | None:
        entry = self._entry(rel)
        return entry.mode if entry else None

    def names(self, rel: str) -> list[str]:
        if not covers(self._listed, rel):  # named in an error, say, not read: not listed whole
            return self._names_only(rel)
        self._entry(rel)
        if self._children is None:
            self._children = children(self._entries)
        return self._children.get(rel, [])

    def size(self, rel: str) -> int:
        return self._entries[rel].size

    def content_id(self, rel: str) -> str | None:
        return self._entries[rel].blob

    def prefetch(self, rels: Iterable[str]) -> None:
        """Reads every file in `rels` now, in one go."""
        self._prefetched = self._read(list(rels))

    def read(self, rel: str, limit: int) -> bytes:
        data = self._prefetched.pop(rel, None)
        if data is None:
            data = self._read([rel])[rel]
        return data[: limit + 1]

    def materialized(self, rels: Sequence[str]) -> Path:
        """The tree's private snapshot, holding (at least) the files under each of `rels`:
        their blobs' bytes, written only once their sizes fit the revision's byte limit."""
        if self._snapshot is None:
            self._snapshot = new_snapshot(self._runner, self._cache_dir)
        files = [path for path in self._files_under(rels) if path not in self._written]
        self._admit(files)
        if files:
            contents = self._read(files)
            write_files(self._runner, self._snapshot, contents)
            self._written.update(files)
        return self._snapshot

    def close(self) -> None:
        self._prefetched = {}
        if self._snapshot is not None:
            remove_snapshot(self._snapshot)

    def _names_only(self, rel: str) -> list[str]:
        """The names in a directory no listing covers, within the revision's entry limit."""
        sha, most = self._revision.sha, self._limits.max_entries
        with locked(self._runner):
            return recovering(self._runner, lambda r: _named(r, sha, rel, most))

    def _entry(self, rel: str) -> Entry | None:
        if rel == WHOLE:
            return DIRECTORY
        if not covers(self._listed, rel) and rel not in self._entries:
            self._list([rel])
        return self._entries.get(rel)

    def _list(self, paths: Iterable[str]) -> None:
        """Lists `paths` (with their ancestors) into the entries, within what is left of the
        revision's entry limit."""
        wanted = list(paths)
        left = self._limits.max_entries - len(self._entries)
        sha, known = self._revision.sha, self._entries.keys()
        if known:  # a further listing, of what a kustomization reaches: this tree's own
            with locked(self._runner):
                found = recovering(self._runner, lambda r: _listed(r, sha, wanted, left, known))
        else:
            found = self._first_listing(tuple(wanted), left)
        self._entries.update(found)
        self._listed.extend(wanted)
        self._children = None

    def _first_listing(self, paths: tuple[str, ...], limit: int) -> dict[str, Entry]:
        """The listing of the source's paths: as another source of this repository read it
        lately, or read now (asked again under the lock, so those that waited for one
        listing use it)."""
        repo, sha = self._runner.repo, self._revision.sha
        found = RECENT_READS.listing(repo, sha, paths, limit)
        if found is not None:
            return found
        with locked(self._runner):
            found = RECENT_READS.listing(repo, sha, paths, limit)
            if found is None:
                found = recovering(self._runner, lambda r: _listed(r, sha, list(paths), limit, ()))
                RECENT_READS.keep_listing(repo, sha, paths, limit, found)
        return found

    def _files_under(self, rels: Sequence[str]) -> list[str]:
        """The regular files that are `rels` or lie in directories among them (symlinks are
        never written: kustomize must not follow one)."""
        for rel in rels:
            self._entry(rel)
        if WHOLE in rels:
            return [path for path, entry in self._entries.items() if stat.S_ISREG(entry.mode)]
        wanted = set(rels)
        return [
            path
            for path, entry in self._entries.items()
            if stat.S_ISREG(entry.mode) and not wanted.isdisjoint(_self_and_ancestors(path))
        ]

    def _admit(self, files: list[str]) -> None:
        """Adds the files' sizes to what the snapshot holds, refusing before anything is
        written when that passes the revision's byte limit."""
        limit = self._limits.max_revision_bytes
        total = self._written_bytes + sum(self._entries[path].size for path in files)
        if total > limit:
            largest = max(files, key=lambda path: self._entries[path].size)
            raise ManifestError(
                f"{largest}: the {len(files)} files kustomize would read (this one the "
                f"largest) add up to {total} bytes, over the per-revision limit of {limit} "
                f"({how_to_raise('max_revision_bytes')}); none was written",
                ManifestReason.SIZE_LIMIT,
            )
        self._written_bytes = total

    def _read(self, rels: list[str]) -> dict[str, bytes]:
        if not rels:
            return {}
        blob_of = {rel: self._entries[rel].blob for rel in rels}
        contents = self._contents(sorted(set(blob_of.values())))
        return {rel: contents[blob] for rel, blob in blob_of.items()}

    def _contents(self, blobs: list[str]) -> dict[str, bytes]:
        """The blobs' contents: those another source of this repository read lately, and
        the rest from the object store in one git (asked again under the lock)."""
        repo = self._runner.repo
        contents = RECENT_READS.contents(repo, blobs)
        if len(contents) == len(blobs):
            return contents
        with locked(self._runner):
            contents = RECENT_READS.contents(repo, blobs)
            missing = [blob for blob in blobs if blob not in contents]
            if missing:
                sha = self._revision.sha
                read = recovering(self._runner, lambda r: read_blobs(r, sha, missing))
                RECENT_READS.keep_contents(repo, read)
                contents.update(read)
                self.blobs_read += len(missing)
        return contents


def _listed(
    runner: Runner, sha: str, paths: list[str], limit: int, known: Collection[str]
) -> dict[str, Entry]:
    """The listing, from a repository that holds the commit (the cache may have been
    cloned again since the fetch, by this process or another)."""
    ensure_commit(runner, sha)
    return list_paths(runner, sha, paths, limit, known)


def _self_and_ancestors(path: str) -> Iterator[str]:
    yield path
    while "/" in path:
        path = path.rpartition("/")[0]
        yield path


def _named(runner: Runner, sha: str, directory: str, most: int) -> list[str]:
    ensure_commit(runner, sha)
    return list_names(runner, sha, directory, most)
