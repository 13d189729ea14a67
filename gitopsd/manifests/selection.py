"""Which files of a revision are read: the configured paths, walked without following links.

The walk is depth-first in name order, so the result is stable; a directory holding a
kustomization is one unit, rendered whole, and so is a chart (a directory holding
Chart.yaml; a kustomization beside it wins, as it may inflate the chart itself); include
globs match a file's name, exclude globs its root-relative path. A symlink anywhere on the
way is an error, never followed.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath

from gitopsd.errors import ManifestError, ManifestReason, SourceError, SourceReason
from gitopsd.manifests.tree import Tree, symlink_error

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
CHART_FILE = "Chart.yaml"
DEFAULT_INCLUDE = ("*.yaml", "*.yml", "*.json")

MAX_NAMES_LISTED = 20
"""Names a missing path's error lists from the directory it was sought in."""


@dataclass(frozen=True)
class Source:
    """One unit to parse: a manifest file, or a kustomization or chart directory rendered
    whole."""

    rel: str  # root-relative posix path of the file or directory
    kustomization: bool = False
    chart: bool = False

    @property
    def rendered(self) -> bool:
        return self.kustomization or self.chart


@dataclass(frozen=True)
class Globs:
    include: tuple[str, ...]  # matched against a file's name
    exclude: tuple[str, ...]  # matched against the root-relative path

    def reads(self, rel: str) -> bool:
        name = rel.rpartition("/")[2]
        return any(fnmatchcase(name, glob) for glob in self.include)

    def skips(self, rel: str) -> bool:
        return any(fnmatchcase(rel, glob) for glob in self.exclude)


def sources(
    tree: Tree, paths: Sequence[str], globs: Globs, named: bool = False
) -> Iterator[Source]:
    """Each file or kustomization once, even when configured paths overlap. A path the user
    `named` that holds nothing to read is an error: a typo there would sync nothing."""
    seen: set[Source] = set()
    for configured in paths:
        top = _checked_path(tree, configured)
        found = False
        for source in _walk(tree, top, globs):
            found = True
            if source not in seen:
                seen.add(source)
                yield source
        if named and not found:
            raise ManifestError(_nothing_at(configured, globs), ManifestReason.INVALID)


def _nothing_at(configured: str, globs: Globs) -> str:
    skipped = (
        f", or the exclude globs ({', '.join(globs.exclude)}) skip them" if globs.exclude else ""
    )
    return (
        f"path {configured}: holds no manifest to read: no file there is named "
        f"{', '.join(globs.include)}{skipped}, and no directory holds a kustomization or "
        "a Chart.yaml"
    )


def _checked_path(tree: Tree, configured: str) -> str:
    """The configured path as a root-relative posix path, after checking every component."""
    pure = PurePosixPath(configured)
    if "\0" in configured or pure.is_absolute() or ".." in pure.parts:
        shown = configured.replace("\0", "\\0")
        raise ManifestError(
            f"{shown}: path must stay inside the source root", ManifestReason.PATH_ESCAPE
        )
    for count in range(1, len(pure.parts) + 1):
        rel = "/".join(pure.parts[:count])
        mode = tree.mode(rel)
        if mode is None:
            there = _what_is_there(tree, pure.parts[: count - 1])
            raise ManifestError(
                f"path {pure.as_posix()} not found in the revision{there}", ManifestReason.INVALID
            )
        if stat.S_ISLNK(mode):
            raise symlink_error(rel)
    return pure.as_posix()


def _what_is_there(tree: Tree, parts: tuple[str, ...]) -> str:
    """What the deepest directory of a missing path that exists holds (its first names), to
    spot a typo; nothing under a file. Names alone: telling a directory from a file would
    list each one, and a git subtree may hold more than a revision may."""
    directory = "/".join(parts) or "."
    if parts and not stat.S_ISDIR(tree.mode(directory) or 0):
        return ""
    names = tree.names(directory)
    where = f"{directory}/" if parts else "the root"
    if not names:
        return f"; {where} is empty"
    more = len(names) - MAX_NAMES_LISTED
    listed = ", ".join(names[:MAX_NAMES_LISTED]) + (f" and {more} more" if more > 0 else "")
    return f"; {where} holds {listed}"


def _walk(tree: Tree, top: str, globs: Globs) -> Iterator[Source]:
    """Depth-first in name order, with an explicit stack so deep trees cannot recurse."""
    pending = [top]
    while pending:
        rel = pending.pop()
        mode = tree.mode(rel)
        if mode is None:  # listed a moment ago: half a tree must never become desired state
            raise SourceError(f"{rel}: vanished while the revision was read", SourceReason.CORRUPT)
        if stat.S_ISLNK(mode):
            raise symlink_error(rel)
        if stat.S_ISDIR(mode):
            names = tree.names(rel)
            if _holds(tree, rel, names, KUSTOMIZATION_FILES):
                yield Source(rel, kustomization=True)
                continue
            if _holds(tree, rel, names, (CHART_FILE,)):
                yield Source(rel, chart=True)
                continue
            children = [child_path(rel, name) for name in names if name != ".git"]
            pending.extend(reversed([child for child in children if not globs.skips(child)]))
        elif rel == top or globs.reads(rel):  # a file named in the config is always read
            if not stat.S_ISREG(mode):
                raise ManifestError(f"{rel}: not a regular file", ManifestReason.INVALID)
            yield Source(rel)


def _holds(tree: Tree, rel: str, names: list[str], files: tuple[str, ...]) -> bool:
    """Whether directory `rel` holds one of `files` (a symlink to one is an error)."""
    markers = [name for name in names if name in files]
    for marker in markers:
        if stat.S_ISLNK(tree.mode(child_path(rel, marker)) or 0):
            raise symlink_error(child_path(rel, marker))
    return bool(markers)


def child_path(rel: str, name: str) -> str:
    """The root-relative posix path of `name` in directory `rel`."""
    return name if rel == "." else f"{rel}/{name}"
