"""Reading a revision's selected files into manifests, within the revision's limits.

Each file is admitted under the revision's byte limit before it is read, so a huge file
costs a stat and nothing more; documents add up against the revision's document limit.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

from gitopsd.config import Limits, how_to_raise
from gitopsd.errors import ManifestError, SourceError
from gitopsd.manifests.bounds import check_object_size, documents_error, revision_bytes_error
from gitopsd.manifests.cache import ParseCache
from gitopsd.manifests.identity import manifests_of
from gitopsd.manifests.parsing import decode, parse_documents
from gitopsd.manifests.selection import (
    DEFAULT_INCLUDE,
    Globs,
    Source,
    child_path,
    sources,
    symlink_error,
)
from gitopsd.manifests.yaml_loader import Documents
from gitopsd.objects import Manifest

Render = Callable[[Path, Path, int], str]
"""Renders a kustomization: (checkout root, its directory, bytes left of the revision limit)."""

_DEFAULT_LIMITS = Limits()


def load(
    root: Path,
    paths: Sequence[str],
    *,
    include: Sequence[str] = DEFAULT_INCLUDE,
    exclude: Sequence[str] = (),
    limits: Limits = _DEFAULT_LIMITS,
    blob_ids: Mapping[str, str] | None = None,
    cache: ParseCache | None = None,
    render_kustomization: Render | None = None,
) -> list[Manifest]:
    """Every manifest under `paths` (relative to `root`), in a stable order.

    `blob_ids` maps root-relative posix paths to git blob shas so unchanged files are
    neither read nor parsed again. Raises ManifestError on the first invalid input.
    """
    reader = _Reader(root, limits, blob_ids or {}, cache or ParseCache(), render_kustomization)
    globs = Globs(tuple(include), tuple(exclude))
    manifests: list[Manifest] = []
    try:
        for source in sources(root, paths, globs):
            manifests.extend(reader.manifests(source))
    except OSError as error:  # a file that cannot be read is an error, never a skip
        raise _unreadable(root, error) from None
    return manifests


def _unreadable(root: Path, error: OSError) -> SourceError:
    where = Path(error.filename or ".")
    shown = where.relative_to(root) if where.is_relative_to(root) else where.name
    return SourceError(f"{shown}: cannot be read: {error.strerror or error}", "corrupt")


class _Reader:
    """Reads sources one after another, keeping the revision's running totals."""

    def __init__(
        self,
        root: Path,
        limits: Limits,
        blob_ids: Mapping[str, str],
        cache: ParseCache,
        render: Render | None,
    ) -> None:
        self.root, self.limits, self.blob_ids = root, limits, blob_ids
        self.cache, self.render = cache, render
        self.total_bytes = 0
        self.total_documents = 0

    def manifests(self, source: Source) -> list[Manifest]:
        if source.kustomization:
            path = child_path(source.rel, "kustomization.yaml")
            documents = self._rendered(source.rel, path)
        else:
            path, documents = source.rel, self._file(source.rel)
        self._count(path, documents)
        return manifests_of(path, documents)

    def _file(self, rel: str) -> Documents:
        size = (self.root / rel).lstat().st_size
        if rel.endswith(".json"):  # one JSON file is one object
            check_object_size(rel, size, self.limits)
        allowed = self._admit(rel, size)
        blob = self.blob_ids.get(rel)
        if blob is not None:
            cached = self.cache.lookup(self._key(f"blob:{blob}", rel))
            if cached is not None:
                return cached  # unchanged since an earlier revision: not even read
        data = _read(self.root / rel, rel, allowed)
        content = f"blob:{blob}" if blob is not None else _sha256(data)
        return self._parsed(content, rel, lambda: decode(data, rel))

    def _rendered(self, rel: str, path: str) -> Documents:
        if self.render is None:
            raise ManifestError(
                f"{path}: {rel} has a kustomization.yaml; rendering it needs kubectl on PATH",
                "invalid",
            )
        text = self.render(
            self.root, self.root / rel, self.limits.max_revision_bytes - self.total_bytes
        )
        data = text.encode()
        self._admit(path, len(data))
        return self._parsed(_sha256(data), path, lambda: text)

    def _admit(self, rel: str, size: int) -> int:
        """The revision's byte limit comes before reading, so a huge file costs a stat and
        nothing more. Returns how large the file may still grow while it is read."""
        limit = self.limits.max_revision_bytes
        if self.total_bytes + size > limit:
            raise revision_bytes_error(rel, self.total_bytes + size, limit)
        allowed = limit - self.total_bytes
        self.total_bytes += size
        return allowed

    def _count(self, path: str, documents: Documents) -> None:
        """Each file's parse is bounded by the same limit; here the files add up."""
        limit = self.limits.max_documents
        before, self.total_documents = self.total_documents, self.total_documents + len(documents)
        if self.total_documents > limit:
            line = documents[limit - before][0]  # the first document over the limit
            raise documents_error(f"{path}:{line}", limit)

    def _parsed(self, content: str, path: str, text: Callable[[], str]) -> Documents:
        key = self._key(content, path)
        cached = self.cache.lookup(key)
        if cached is not None:
            return cached
        return self.cache.store(key, parse_documents(text(), path, self.limits))

    def _key(self, content: str, path: str) -> Hashable:
        # JSON and YAML parse the same bytes differently, and limits decide what is accepted.
        return (content, path.endswith(".json"), self.limits)


def _read(path: Path, rel: str, limit: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise symlink_error(rel) from exc  # swapped for a symlink since the walk
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:  # grew since stat
        raise ManifestError(
            f"{rel}: grew past the per-revision limit while being read "
            f"({how_to_raise('max_revision_bytes')})",
            "size_limit",
        )
    return data


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
