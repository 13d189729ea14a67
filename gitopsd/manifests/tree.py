"""A revision's files as the reader sees them: a narrow seam with two implementations.

`Directory` reads a directory in place (a local source, or a snapshot already private);
gitopsd.source's `GitTree` reads a git revision from the object store by blob id, so an
unchanged file whose parse is cached is never read at all. Paths are root-relative posix
paths; the root itself is ".".
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from gitopsd.errors import ManifestError, ManifestReason, SourceError, SourceReason


class Tree(Protocol):
    def mode(self, rel: str) -> int | None:
        """The entry's own file mode (a symlink is not followed), or None if there is none."""

    def names(self, rel: str) -> list[str]:
        """The names in directory `rel`, sorted."""

    def size(self, rel: str) -> int:
        """The size in bytes of file `rel`, known without reading it."""

    def content_id(self, rel: str) -> str | None:
        """The git blob sha of file `rel`, when known without reading it."""

    def prefetch(self, rels: Iterable[str]) -> None:
        """The files about to be read, in order: a tree may fetch them all in one go."""

    def read(self, rel: str, limit: int) -> bytes:
        """The bytes of file `rel`, at most `limit` + 1 of them (more than `limit`: too big)."""

    def materialized(self, rels: Sequence[str]) -> Path:
        """A private directory holding (at least) the files and directories `rels`, for a
        program that reads files; it lives as long as the tree is open."""


class Directory:
    """A directory read in place; `blob_ids` may name the git blob of its files."""

    def __init__(self, root: Path, blob_ids: Mapping[str, str] | None = None) -> None:
        self.root = root
        self._blob_ids = blob_ids or {}

    def mode(self, rel: str) -> int | None:
        try:
            return (self.root / rel).lstat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise _unreadable(rel, error) from None

    def names(self, rel: str) -> list[str]:
        with self._reading(rel):
            return sorted(entry.name for entry in (self.root / rel).iterdir())

    def size(self, rel: str) -> int:
        with self._reading(rel):
            return (self.root / rel).lstat().st_size

    def content_id(self, rel: str) -> str | None:
        return self._blob_ids.get(rel)

    def prefetch(self, rels: Iterable[str]) -> None:
        """Files are read in place, one at a time, when their turn comes."""

    def read(self, rel: str, limit: int) -> bytes:
        with self._reading(rel):
            try:
                fd = os.open(self.root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise symlink_error(rel) from exc  # swapped for a symlink since the walk
            with os.fdopen(fd, "rb") as file:
                return file.read(limit + 1)

    def materialized(self, rels: Sequence[str]) -> Path:
        """The directory itself: it is the source's own, or a private snapshot already."""
        return self.root

    @contextmanager
    def _reading(self, rel: str) -> Iterator[None]:
        """A file that cannot be read is an error, never a skip: half a tree must never
        become the desired set, or prune would act on the other half."""
        try:
            yield
        except (FileNotFoundError, NotADirectoryError):
            raise SourceError(
                f"{rel}: vanished while the revision was read", SourceReason.CORRUPT
            ) from None
        except OSError as error:
            raise _unreadable(rel, error) from None


def _unreadable(rel: str, error: OSError) -> SourceError:
    return SourceError(f"{rel}: cannot be read: {error.strerror or error}", SourceReason.CORRUPT)


def symlink_error(rel: str) -> ManifestError:
    # The target is not named: it may point at a secret outside the repository.
    return ManifestError(
        f"{rel}: is a symlink; gitopsd never follows symlinks", ManifestReason.SYMLINK
    )


def copy_paths(root: Path, rels: Iterable[str], target: Path) -> None:
    """The files and directories `rels` of `root` copied under `target` as they are: links
    as links, never followed, and no `.git` (a directory read in place may hold one)."""
    for rel in sorted(rels):
        source, copy = root / rel, target / rel
        if source.is_dir() and not source.is_symlink():
            skip_git = shutil.ignore_patterns(".git")
            shutil.copytree(source, copy, symlinks=True, dirs_exist_ok=True, ignore=skip_git)
        elif source.exists() or source.is_symlink():
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.unlink(missing_ok=True)
            shutil.copy2(source, copy, follow_symlinks=False)
