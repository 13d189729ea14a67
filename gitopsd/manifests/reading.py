"""Reading a revision's selected files into manifests, within the revision's limits.

Each file is admitted under the revision's byte limit before it is read, so a huge file
costs its size from the listing and nothing more; documents add up against the revision's
document limit. A file whose content id the cache knows is neither read nor parsed again,
yet its bytes and documents still count, so the limits hold over the whole revision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitopsd.config import Limits, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests.bounds import check_object_size, documents_error, revision_bytes_error
from gitopsd.manifests.cache import ParseCache, Parsed
from gitopsd.manifests.identity import manifests_of
from gitopsd.manifests.parsing import decode, parse_documents
from gitopsd.manifests.selection import (
    CHART_FILE,
    DEFAULT_INCLUDE,
    Globs,
    Source,
    child_path,
    sources,
)
from gitopsd.manifests.tree import Directory, Tree
from gitopsd.objects import Manifest

Render = Callable[[Tree, str, Limits, int], str]
"""Renders a kustomization: (the revision's tree, the kustomization's directory in it, the
revision's limits, bytes left of its byte limit)."""


@dataclass(frozen=True)
class ChartRender:
    """A chart directory, checked once: what its render depends on, and the render."""

    fingerprint: str | None
    """What the render depends on, or None when it cannot be known without reading."""
    render: Callable[[int], list[tuple[str, str]]]
    """(path of the template, its rendered YAML) pieces, in the order written, given the
    bytes left of the revision's limit."""


RenderChart = Callable[[Tree, str, Limits], ChartRender]
"""Checks a chart directory (the revision's tree, the chart's directory in it, the
revision's limits) for its render: what `Render` is to a kustomization."""

Confine = Callable[[Sequence[Manifest]], None]
"""Checks the manifests of a file or a render when they are parsed (not when the cache
gives them again: they were checked then); raises ManifestError to refuse them."""


_DEFAULT_LIMITS = Limits()


def load(
    root: Path | Tree,
    paths: Sequence[str],
    *,
    include: Sequence[str] = DEFAULT_INCLUDE,
    exclude: Sequence[str] = (),
    limits: Limits = _DEFAULT_LIMITS,
    blob_ids: Mapping[str, str] | None = None,
    cache: ParseCache | None = None,
    render_kustomization: Render | None = None,
    render_chart: RenderChart | None = None,
    paths_named: bool = False,
    confine: Confine | None = None,
    deferred: bool = False,
) -> list[Manifest]:
    """Every manifest under `paths` (relative to the root), in a stable order; a path
    that holds nothing to read is an error when the user named it (`paths_named`).

    `root` is a directory read in place, where `blob_ids` may map root-relative posix paths
    to git blob shas, or a tree that knows its own (a git revision's). A file whose blob
    the cache holds is neither read nor parsed again, nor is a chart whose fingerprint it
    holds rendered again; `confine` checks what is parsed; `deferred`: names and values
    holding `${` are checked after substitution (`manifests_of`). Raises ManifestError on the first
    invalid input, SourceError when the tree cannot be read.
    """
    tree = Directory(root, blob_ids) if isinstance(root, Path) else root
    globs = Globs(tuple(include), tuple(exclude))
    selected = list(sources(tree, paths, globs, paths_named))
    cache = cache if cache is not None else ParseCache()
    reader = _Reader(tree, limits, cache, render_kustomization, render_chart, confine)
    reader.deferred = deferred
    tree.prefetch(reader.unparsed(selected))
    found = [manifest for source in selected for manifest in reader.manifests(source)]
    cache.keep_only(reader.used)
    return found


class _Reader:
    """Reads sources one after another, keeping the revision's running totals."""

    def __init__(
        self,
        tree: Tree,
        limits: Limits,
        cache: ParseCache,
        render: Render | None,
        render_chart: RenderChart | None,
        confine: Confine | None,
    ) -> None:
        self.tree, self.limits, self.cache, self.render = tree, limits, cache, render
        self.render_chart, self.confine = render_chart, confine
        self.total_bytes = 0
        self.total_documents = 0
        self.used: set[Hashable] = set()
        """The cache entries this revision's files are."""
        self.deferred = False
        """Names and values holding `${` are checked after substitution."""

    def unparsed(self, selected: Iterable[Source]) -> Iterator[str]:
        """The files the cache holds no parse of, as far as the byte limit lets them be
        read (renders only add to the total)."""
        total = 0
        for source in selected:
            if source.rendered:
                continue
            size = self.tree.size(source.rel)
            total += size
            if total > self.limits.max_revision_bytes:
                return
            if not (self._refused_unread(source.rel, size) or self._parse_cached(source.rel)):
                yield source.rel

    def manifests(self, source: Source) -> tuple[Manifest, ...]:
        if source.kustomization:
            path = child_path(source.rel, "kustomization.yaml")
            parsed = self._rendered(source.rel, path)
        elif source.chart:
            path = child_path(source.rel, CHART_FILE)
            parsed = self._chart(source.rel, path)
        else:
            path, parsed = source.rel, self._file(source.rel)
        self._count(path, parsed)
        return parsed.manifests

    def _file(self, rel: str) -> Parsed:
        size = self.tree.size(rel)
        if rel.endswith(".json"):  # one JSON file is one object
            check_object_size(rel, size, self.limits)
        allowed = self._admit(rel, size)
        blob = self.tree.content_id(rel)
        if blob is not None:  # read only if the cache has no parse of the blob
            return self._parsed(f"blob:{blob}", rel, lambda: decode(self._read(rel, allowed), rel))
        data = self._read(rel, allowed)
        return self._parsed(_sha256(data), rel, lambda: decode(data, rel))

    def _read(self, rel: str, allowed: int) -> bytes:
        data = self.tree.read(rel, allowed)
        if len(data) > allowed:  # grew since its size was taken
            raise ManifestError(
                f"{rel}: grew past the per-revision limit while being read "
                f"({how_to_raise('max_revision_bytes')})",
                ManifestReason.SIZE_LIMIT,
            )
        return data

    def _rendered(self, rel: str, path: str) -> Parsed:
        if self.render is None:
            raise ManifestError(
                f"{path}: {rel} has a kustomization.yaml; rendering it needs kubectl on PATH",
                ManifestReason.INVALID,
            )
        left = self.limits.max_revision_bytes - self.total_bytes
        text = self.render(self.tree, rel, self.limits, left)
        data = text.encode()
        self._admit(path, len(data))
        return self._parsed(_sha256(data), path, lambda: text)

    def _chart(self, rel: str, path: str) -> Parsed:
        """The chart's manifests, rendered only when the cache has no render of its
        fingerprint; its bytes count either way."""
        render = self.render_chart
        if render is None:
            raise ManifestError(
                f"{path}: {rel} is a chart; rendering it needs helm on PATH",
                ManifestReason.INVALID,
            )
        left = self.limits.max_revision_bytes - self.total_bytes
        chart = render(self.tree, rel, self.limits)

        def rendered() -> Parsed:
            pieces = chart.render(left)
            return self._confined(_parsed_pieces(pieces, self.limits, self.deferred))

        if chart.fingerprint is None:
            parsed = rendered()
        else:
            key = ("chart", chart.fingerprint, rel, self.limits, self.deferred)
            self.used.add(key)
            parsed = self.cache.get(key, rendered)
        self._admit(path, parsed.size)
        return parsed

    def _admit(self, rel: str, size: int) -> int:
        """The revision's byte limit comes before reading, so a huge file costs its size
        and nothing more. Returns how large the file may still grow while it is read."""
        limit = self.limits.max_revision_bytes
        if self.total_bytes + size > limit:
            raise revision_bytes_error(rel, self.total_bytes + size, limit)
        allowed = limit - self.total_bytes
        self.total_bytes += size
        return allowed

    def _count(self, path: str, parsed: Parsed) -> None:
        """Each file's parse is bounded by the same limit; here the files add up."""
        limit = self.limits.max_documents
        lines = parsed.lines
        before, self.total_documents = self.total_documents, self.total_documents + len(lines)
        if self.total_documents > limit:
            line = lines[limit - before]  # the first document over the limit
            raise documents_error(f"{path}:{line}", limit)

    def _refused_unread(self, rel: str, size: int) -> bool:
        return rel.endswith(".json") and size > self.limits.max_object_bytes

    def _parse_cached(self, rel: str) -> bool:
        blob = self.tree.content_id(rel)
        return blob is not None and self.cache.lookup(self._key(f"blob:{blob}", rel)) is not None

    def _parsed(self, content: str, path: str, text: Callable[[], str]) -> Parsed:
        key = self._key(content, path)
        self.used.add(key)

        def parse() -> Parsed:
            documents = parse_documents(text(), path, self.limits)
            manifests = tuple(manifests_of(path, documents, self.deferred))
            return self._confined(Parsed(manifests, tuple(line for line, _ in documents)))

        return self.cache.get(key, parse)

    def _confined(self, parsed: Parsed) -> Parsed:
        if self.confine is not None:
            self.confine(parsed.manifests)
        return parsed

    def _key(self, content: str, path: str) -> Hashable:
        # Manifests name their file; limits and deferred checks decide what is accepted.
        return (content, path, self.limits, self.deferred)


def _parsed_pieces(pieces: list[tuple[str, str]], limits: Limits, deferred: bool) -> Parsed:
    """A render's pieces parsed, each under the path of the template it came from."""
    manifests: list[Manifest] = []
    lines: list[int] = []
    for path, text in pieces:
        documents = parse_documents(text, path, limits)
        manifests.extend(manifests_of(path, documents, deferred))
        lines.extend(line for line, _ in documents)
    size = sum(len(text.encode()) for _, text in pieces)
    return Parsed(tuple(manifests), tuple(lines), size)


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
