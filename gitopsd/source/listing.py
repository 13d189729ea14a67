"""Listing a commit's tree: only the paths a source reads, streamed, within a bound.

A pack of a few KiB can hold nested trees that name millions of paths, so a revision is
never listed whole: `git ls-tree` lists the subtrees of the source's paths (and, later,
of what its kustomizations reach), with their ancestors, and the listing stops, git
killed, as soon as it passes the revision's entry limit. Paths are taken literally (no
pathspec magic), and every entry comes with its mode, object id and size from the object
database, so what a revision holds is known before any of it is read.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from gitopsd.config import how_to_raise
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.source.runner import Runner

WHOLE = "."
"""The path of the whole tree."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A file or directory of a commit's tree, as git lists it."""

    mode: int
    """File mode bits as `stat` spells them: a directory (0o040000), a regular file
    (0o100644, 0o100755) or a symlink (0o120000)."""
    blob: str
    """Git object id: the same content has the same id in every revision."""
    size: int
    """Bytes of a file's content, known without reading it; 0 for a directory."""


def list_paths(
    runner: Runner, sha: str, paths: Iterable[str], limit: int, known: Collection[str] = ()
) -> dict[str, Entry]:
    """The entries of commit `sha` under each of `paths` (and their ancestors) not among
    `known`. Raises ManifestError once more than `limit` new ones are listed."""
    scopes = sorted({posixpath.normpath(path) for path in paths})
    pathspecs = [] if WHOLE in scopes else ["--", *scopes]
    found: dict[str, Entry] = {}
    command = ("--literal-pathspecs", "ls-tree", "-r", "-t", "-l", "-z", "--full-tree", sha)
    with runner.records(*command, *pathspecs) as records:
        for record in records:
            path, entry = _parsed(record)
            if entry is None or path in known or path in found:
                continue
            found[path] = entry
            if len(found) > limit:
                raise _too_many(scopes, limit)
    return found


def list_names(runner: Runner, sha: str, directory: str, most: int) -> list[str]:
    """The names in `directory` of commit `sha` (not below it), at most `most` of them: for
    a directory the source's paths did not list, which may hold more than a revision may."""
    pathspecs = [] if directory == WHOLE else ["--", f"{directory}/"]
    command = ("--literal-pathspecs", "ls-tree", "-z", "--name-only", "--full-tree", sha)
    names: list[str] = []
    with runner.records(*command, *pathspecs) as records:
        for record in records:
            names.append(os.fsdecode(record).rpartition("/")[2])
            if len(names) >= most:
                break
    return sorted(names)


def covers(listed: Iterable[str], rel: str) -> bool:
    """Whether a listing of `listed` holds every entry at or under `rel`."""
    return any(scope in (WHOLE, rel) or rel.startswith(scope + "/") for scope in listed)


def children(entries: Mapping[str, Entry]) -> dict[str, list[str]]:
    """Each listed directory's names, sorted ("." is the root)."""
    names: dict[str, set[str]] = {WHOLE: set()}
    for path, entry in entries.items():
        parent, _, name = path.rpartition("/")
        names.setdefault(parent or WHOLE, set()).add(name)
        if stat.S_ISDIR(entry.mode):
            names.setdefault(path, set())
    return {directory: sorted(found) for directory, found in names.items()}


def _parsed(record: bytes) -> tuple[str, Entry | None]:
    """`<mode> <type> <object> <size>\\t<path>` (the size padded, "-" for a tree); a
    submodule's commit is no entry."""
    info, _, path = record.partition(b"\t")
    mode, kind, blob, size = info.split()
    name = os.fsdecode(path)
    if kind == b"tree":
        return name, Entry(stat.S_IFDIR | 0o755, blob.decode(), 0)
    if kind == b"blob":
        return name, Entry(int(mode, 8), blob.decode(), int(size))
    return name, None


def _too_many(scopes: list[str], limit: int) -> ManifestError:
    where = ", ".join(scopes)
    return ManifestError(
        f"{where}: the revision holds more than {limit} files and directories there; nothing "
        f"of it was read ({how_to_raise('max_entries')})",
        ManifestReason.SIZE_LIMIT,
    )
