"""What helm may read when it renders a chart directory: only files of the revision.

A chart is a directory whose root holds Chart.yaml. helm loads every file under it
(templates, values, `.Files`), follows symlinks as it walks, unpacks the archives under
`charts/`, and would fetch a dependency it lacks. So before helm runs, the chart is walked
here: no symlink anywhere in it, every archive under `charts/` read as a stream and bounded
(decompressed bytes, members, no links, no path out of it, archives within archives too),
values files inside the checkout, and each `file://` dependency that is not vendored resolved
to a chart directory inside the checkout and checked the same way. A dependency from a chart
repository or registry that is not vendored is listed with the version Chart.lock pins
(else its range in Chart.yaml), for the renderer to fetch. Pure path logic: this module
reads the revision's tree and runs nothing.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitopsd import archives
from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests import CHART_FILE, Tree, child_path, parse_documents

MAX_CHART_FILE_BYTES = 1024 * 1024
"""A Chart.yaml larger than this is refused before it is read."""
MAX_DEPENDENCY_DEPTH = 10


LOCK_FILE = "Chart.lock"


@dataclass(frozen=True)
class Dependency:
    """A `file://` dependency helm needs under `charts/` but the chart does not vendor."""

    name: str
    chart: Chart


@dataclass(frozen=True)
class RemoteDependency:
    """A dependency from a chart repository or registry, not vendored: fetched by gitopsd
    at the version Chart.lock pins, else the highest its range in Chart.yaml allows."""

    name: str
    repository: str
    version: str


@dataclass(frozen=True)
class Chart:
    """A chart directory as checked: what helm will read when it renders it."""

    rel: str
    """Its root-relative posix path."""
    name: str
    """The name its Chart.yaml gives it."""
    files: tuple[str, ...]
    """Every file in it (root-relative), archives included: what a private copy must hold."""
    dependencies: tuple[Dependency, ...] = ()
    remote: tuple[RemoteDependency, ...] = ()
    library: bool = False
    """A library chart: templates for other charts, nothing of its own to install."""

    def every_file(self) -> Iterator[str]:
        yield from self.files
        for dependency in self.dependencies:
            yield from dependency.chart.every_file()


def inspect(tree: Tree, rel: str, limits: Limits) -> Chart:
    """Checks the chart in directory `rel` and every `file://` dependency it needs placed."""
    budget = archives.Budget(limits.max_revision_bytes, limits.max_entries)
    return _inspect(tree, rel, limits, budget, depth=0)


def _inspect(tree: Tree, rel: str, limits: Limits, budget: archives.Budget, depth: int) -> Chart:
    chart_file = child_path(rel, CHART_FILE)
    mode = tree.mode(chart_file)
    if mode is None or not stat.S_ISREG(mode):
        raise ManifestError(f"{rel}: a chart needs a regular file {CHART_FILE}")
    files = tuple(_files(tree, rel))
    for archive in (f for f in files if _is_subchart_archive(rel, f)):
        _check_archive(tree, archive, budget)
    metadata = _read_chart_file(tree, chart_file, limits)
    vendored = set(tree.names(child_path(rel, "charts"))) if "charts" in tree.names(rel) else set()
    locked = _locked_versions(tree, rel, limits)
    dependencies, remote = [], []
    for name, repository, version in _dependencies(metadata, chart_file):
        if _is_vendored(name, vendored):
            continue
        if repository.startswith("file://"):
            if depth >= MAX_DEPENDENCY_DEPTH:
                raise ManifestError(
                    f"{chart_file}: file:// dependencies nest deeper than {MAX_DEPENDENCY_DEPTH}"
                )
            target = _local_chart(tree, chart_file, rel, repository)
            dependencies.append(Dependency(name, _inspect(tree, target, limits, budget, depth + 1)))
        elif repository:
            pinned = locked.get((name, repository), version)
            remote.append(RemoteDependency(name, _remote(repository, chart_file, name), pinned))
    name = str(metadata.get("name") or "")
    library = metadata.get("type") == "library"
    return Chart(rel, name, files, tuple(dependencies), tuple(remote), library)


def _remote(repository: str, chart_file: str, name: str) -> str:
    """A dependency's repository as a URL gitopsd can fetch from (checked when fetched)."""
    if repository.startswith(("@", "alias:")):
        raise ManifestError(
            f"{chart_file}: dependency {name}: repository {repository[:100]!r} names a repository "
            "of helm's own configuration, which gitopsd has none of: give its URL"
        )
    return repository


def _locked_versions(tree: Tree, rel: str, limits: Limits) -> dict[tuple[str, str], str]:
    """The versions Chart.lock pins, by dependency name and repository."""
    lock_file = child_path(rel, LOCK_FILE)
    if not stat.S_ISREG(tree.mode(lock_file) or 0):
        return {}
    locked = {}
    for name, repository, version in _dependencies(
        _read_chart_file(tree, lock_file, limits), lock_file
    ):
        if version:
            locked[name, repository] = f"={version}"
    return locked


def _files(tree: Tree, top: str) -> Iterator[str]:
    """Every file under `top`, depth-first in name order; a symlink is an error."""
    pending = [top]
    while pending:
        rel = pending.pop()
        mode = tree.mode(rel)
        if mode is None:
            raise ManifestError(f"{rel}: vanished while the chart was read")
        if stat.S_ISLNK(mode):
            raise ManifestError(f"{rel}: {archives.SYMLINK}", ManifestReason.SYMLINK)
        if stat.S_ISDIR(mode):
            pending.extend(reversed([child_path(rel, name) for name in tree.names(rel)]))
        elif stat.S_ISREG(mode):
            yield rel
        else:
            raise ManifestError(f"{rel}: not a regular file", ManifestReason.INVALID)


def _is_subchart_archive(chart: str, rel: str) -> bool:
    return rel.startswith(child_path(chart, "charts/")) and rel.endswith(archives.SUFFIXES)


def _is_vendored(name: str, vendored: set[str]) -> bool:
    """Whether `charts/` holds the dependency, as a directory or as `NAME-VERSION.tgz`."""
    return name in vendored or any(
        entry.startswith(f"{name}-") and entry.endswith(archives.SUFFIXES) for entry in vendored
    )


def _read_chart_file(tree: Tree, rel: str, limits: Limits) -> dict[Any, Any]:
    if tree.size(rel) > MAX_CHART_FILE_BYTES:
        raise _too_large(rel)
    data = tree.read(rel, MAX_CHART_FILE_BYTES)
    if len(data) > MAX_CHART_FILE_BYTES:  # grew since its size was taken
        raise _too_large(rel)
    documents = parse_documents(data.decode("utf-8", errors="replace"), rel, limits)
    metadata = documents[0][1] if len(documents) == 1 else None
    if not isinstance(metadata, dict):
        raise ManifestError(f"{rel}: a chart's {CHART_FILE} must be one YAML mapping")
    return metadata


def _dependencies(metadata: dict[Any, Any], chart_file: str) -> Iterator[tuple[str, str, str]]:
    """Each dependency's name, repository ("" for none) and version ("*" for none)."""
    entries = metadata.get("dependencies") or []
    if not isinstance(entries, list):
        raise ManifestError(f"{chart_file}: dependencies must be a list")
    for at, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or "/" in name:
            raise ManifestError(f"{chart_file}: dependencies[{at}]: name must be a chart's name")
        repository = entry.get("repository") or ""
        yield name, str(repository), str(entry.get("version") or "*")


def _local_chart(tree: Tree, chart_file: str, chart: str, repository: str) -> str:
    """The root-relative directory a `file://` dependency names, if it is a directory inside
    the checkout reached through no symlink."""
    shown = repository.replace("\0", "\\0")[:200]
    target = _inside(tree, chart, repository.removeprefix("file://"), chart_file, shown)
    if not stat.S_ISDIR(tree.mode(target) or 0):
        raise ManifestError(f"{chart_file}: dependency {shown}: no such directory")
    return target


def values_file(tree: Tree, chart: str, entry: str, setting: str) -> str:
    """The root-relative path of a values file named relative to the chart, if it is a
    regular file inside the checkout reached through no symlink."""
    shown = entry.replace("\0", "\\0")[:200]
    target = _inside(tree, chart, entry, setting, shown)
    if not stat.S_ISREG(tree.mode(target) or 0):
        raise ManifestError(f"{setting}: {shown}: no such file in the revision ({target})")
    return target


def _inside(tree: Tree, base: str, entry: str, where: str, shown: str) -> str:
    """`entry`, relative to directory `base`, as a root-relative path, if it stays inside
    the checkout and passes through no symlink."""
    if "\0" in entry or posixpath.isabs(entry) or "://" in entry:
        raise _escape(where, shown, "must be a path inside the checkout")
    target = posixpath.normpath(posixpath.join(base, entry))
    if target == ".." or target.startswith("../"):
        raise _escape(where, shown, "resolves outside the checkout")
    parts = target.split("/")
    for count in range(1, len(parts) + 1):
        mode = tree.mode("/".join(parts[:count]))
        if mode is not None and stat.S_ISLNK(mode):
            raise ManifestError(f"{where}: {shown}: {archives.SYMLINK}", ManifestReason.SYMLINK)
    return target


def _check_archive(tree: Tree, rel: str, budget: archives.Budget) -> None:
    """Reads the archive as a stream: what helm would unpack, bounded before helm sees it."""
    if tree.size(rel) > budget.bytes_left:
        raise archives.too_large(rel)
    archives.check(tree.read(rel, budget.bytes_left), rel, budget)


def _too_large(rel: str) -> ManifestError:
    return ManifestError(
        f"{rel}: over the limit of {MAX_CHART_FILE_BYTES} bytes for a {CHART_FILE}",
        ManifestReason.SIZE_LIMIT,
    )


def _escape(where: str, shown: str, problem: str) -> ManifestError:
    return ManifestError(f"{where}: {shown!r} {problem}", ManifestReason.PATH_ESCAPE)
