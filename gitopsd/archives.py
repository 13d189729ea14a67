"""Chart archives (gzipped tar) read as a stream and bounded, before anything unpacks them.

helm unpacks the archives a chart holds under `charts/`, and a chart fetched from a chart
repository is one itself: each is read here first, decompressed as a stream that stops once
its budget (bytes unpacked, members, shared by every archive of one revision) is spent, so a
small archive that unpacks to gigabytes is refused after reading no more than the budget.
Every member must be a regular file or a directory whose path stays inside the archive;
links are refused, and archives within archives are read the same way. Pure: bytes in,
checked file contents out.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitopsd.config import how_to_raise
from gitopsd.errors import ManifestError, ManifestReason

SUFFIXES = (".tgz", ".tar.gz")
SYMLINK = "is a symlink; gitopsd never follows symlinks"


@dataclass
class Budget:
    """Bytes the archives of one revision may unpack to, and members they may hold."""

    bytes_left: int
    members_left: int


def check(data: bytes, rel: str, budget: Budget) -> None:
    """Raises ManifestError unless the archive `data` (named `rel`) is safe to unpack."""
    for _ in files(data, rel, budget):
        pass


def files(data: bytes, rel: str, budget: Budget) -> Iterator[tuple[str, bytes]]:
    """The regular files of the archive, as (normalized member path, contents), checked."""
    stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data)), rel, budget)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                if contents := _checked(archive, member, rel, budget):
                    yield posixpath.normpath(member.name), contents[0]
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise ManifestError(f"{rel}: not a gzipped tar archive ({type(error).__name__})") from None


def _checked(
    archive: tarfile.TarFile, member: tarfile.TarInfo, rel: str, budget: Budget
) -> tuple[bytes] | None:
    """A regular file's contents (a directory: None), once the member passed every check."""
    budget.members_left -= 1
    if budget.members_left < 0:
        raise too_many(rel)
    name = member.name.replace("\0", "\\0")[:200]
    normal = posixpath.normpath(member.name)
    if member.name.startswith("/") or normal == ".." or normal.startswith("../"):
        raise ManifestError(
            f"{rel}: member {name!r} points outside the archive", ManifestReason.PATH_ESCAPE
        )
    if member.issym() or member.islnk():
        raise ManifestError(f"{rel}: member {name!r} {SYMLINK}", ManifestReason.SYMLINK)
    if not (member.isfile() or member.isdir()):
        raise ManifestError(f"{rel}: member {name!r} is not a regular file")
    if member.isdir():
        return None
    reader = archive.extractfile(member)
    assert reader is not None  # noqa: S101 - a regular file
    contents = reader.read()
    if member.name.endswith(SUFFIXES):  # a subchart's own charts/
        check(contents, f"{rel}:{name}", budget)
    return (contents,)


class _Bounded(io.RawIOBase):
    """A decompressed stream that stops being read once the budget is spent."""

    def __init__(self, inner: gzip.GzipFile, rel: str, budget: Budget) -> None:
        self.inner, self.rel, self.budget = inner, rel, budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self.budget.bytes_left -= len(data)
        if self.budget.bytes_left < 0:
            raise too_large(self.rel)
        buffer[: len(data)] = data
        return len(data)


def too_large(rel: str) -> ManifestError:
    return ManifestError(
        f"{rel}: unpacks to more than the per-revision limit "
        f"({how_to_raise('max_revision_bytes')})",
        ManifestReason.SIZE_LIMIT,
    )


def too_many(rel: str) -> ManifestError:
    return ManifestError(
        f"{rel}: its archives hold more members than the per-revision limit "
        f"({how_to_raise('max_entries')})",
        ManifestReason.SIZE_LIMIT,
    )
