"""From a revision's files to validated, identified manifests.

`load` walks the configured paths in a stable order without ever following a symlink,
admits each file under the revision's byte limit, decodes it as strict UTF-8 and parses it
with a hardened YAML loader (or `json`), which bounds each object's size. Every document
then becomes a `Manifest` once its identity (by Kubernetes' naming rules) and labels are
valid. `index` keys the manifests by object and rejects duplicates.

Hostile input is the normal case here (RELIABILITY 6.1): every limit is checked before the
work it bounds, and no error message echoes file content beyond key names, so a Secret's
value can never leak through one.

This module reads files; it never runs a program and never talks to the network.
Kustomizations are rendered through a function the caller passes in.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import json
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from yaml.reader import ReaderError

from gitopsd.config import Limits, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason, SourceError, SourceReason
from gitopsd.names import name_rule, namespace_problem, shown
from gitopsd.objects import (
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    GroupKind,
    Manifest,
    ObjectKey,
    Origin,
    group_of,
)

try:  # libyaml parses several times faster; the pure-Python parser behaves the same.
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

Documents = list[tuple[int, Any]]
"""Parsed documents of one file: (1-based start line, data)."""
Render = Callable[[Path, Path, int], str]
"""Renders a kustomization: (checkout root, its directory, bytes left of the revision limit)."""

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
DEFAULT_INCLUDE = ("*.yaml", "*.yml", "*.json")
_DEFAULT_LIMITS = Limits()
_EXPANSION_FLOOR = 10_000
"""Alias expansion below this many nodes is always fine, whatever the ratio."""
_CACHE_ENTRIES = 50_000


# --- The parse cache -------------------------------------------------------------------


class ParseCache:
    """Parsed documents keyed by content id: a git blob sha, else sha256 of the bytes.

    Most files do not change between revisions, so each is parsed once. Entries are
    returned as fresh copies: a caller that edits a manifest body cannot corrupt the cache.
    """

    def __init__(self, max_entries: int = _CACHE_ENTRIES) -> None:
        self.parses = 0
        """How many files were actually parsed (cache misses)."""
        self._max_entries = max_entries
        self._entries: OrderedDict[Hashable, Documents] = OrderedDict()
        self._lock = threading.Lock()  # the daemon may load several sources at once

    def lookup(self, key: Hashable) -> Documents | None:
        with self._lock:
            documents = self._entries.get(key)
            if documents is None:
                return None
            self._entries.move_to_end(key)
        copy: Documents = _fresh(documents)
        return copy

    def store(self, key: Hashable, documents: Documents) -> Documents:
        """Remember a fresh parse and return a copy the caller owns."""
        with self._lock:
            self.parses += 1
            self._entries[key] = documents
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)  # least recently used
        copy: Documents = _fresh(documents)
        return copy


def _fresh(data: Any) -> Any:
    """A copy sharing nothing mutable, not even YAML aliases (their expansion is bounded)."""
    if isinstance(data, dict):
        return {key: _fresh(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_fresh(item) for item in data]
    if isinstance(data, tuple):  # a cached Documents entry: (line, data)
        return tuple(_fresh(item) for item in data)
    return data  # str, int, float, bool, None: immutable


# --- The story: load and index ---------------------------------------------------------


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
    globs = _Globs(tuple(include), tuple(exclude))
    manifests: list[Manifest] = []
    try:
        for source in _sources(root, paths, globs):
            manifests.extend(reader.manifests(source))
    except OSError as error:  # a file that cannot be read is an error, never a skip
        raise _unreadable(root, error) from None
    return manifests


def _unreadable(root: Path, error: OSError) -> SourceError:
    where = Path(error.filename or ".")
    shown = where.relative_to(root) if where.is_relative_to(root) else where.name
    return SourceError(f"{shown}: cannot be read: {error.strerror or error}", SourceReason.CORRUPT)


def index(manifests: Iterable[Manifest]) -> dict[ObjectKey, Manifest]:
    """Manifests by object identity; an object written twice is an error naming both places."""
    by_key: dict[ObjectKey, Manifest] = {}
    for manifest in manifests:
        first = by_key.setdefault(manifest.key, manifest)
        if first is not manifest:
            raise ManifestError(
                f"{manifest.origin}: duplicate object {manifest.key}: "
                f"{first.origin} and {manifest.origin}",
                ManifestReason.DUPLICATE_OBJECT,
            )
    return by_key


# --- Finding the files -----------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """One unit to parse: a manifest file, or a kustomization directory rendered whole."""

    rel: str  # root-relative posix path of the file or directory
    kustomization: bool = False


@dataclass(frozen=True)
class _Globs:
    include: tuple[str, ...]  # matched against a file's name
    exclude: tuple[str, ...]  # matched against the root-relative path

    def reads(self, rel: str) -> bool:
        name = rel.rpartition("/")[2]
        return any(fnmatchcase(name, glob) for glob in self.include)

    def skips(self, rel: str) -> bool:
        return any(fnmatchcase(rel, glob) for glob in self.exclude)


def _sources(root: Path, paths: Sequence[str], globs: _Globs) -> Iterator[_Source]:
    """Each file or kustomization once, even when configured paths overlap."""
    seen: set[_Source] = set()
    for configured in paths:
        top = _checked_path(root, configured)
        for source in _walk(root, top, globs):
            if source not in seen:
                seen.add(source)
                yield source


def _checked_path(root: Path, configured: str) -> str:
    """The configured path as a root-relative posix path, after checking every component."""
    pure = PurePosixPath(configured)
    if "\0" in configured or pure.is_absolute() or ".." in pure.parts:
        shown = configured.replace("\0", "\\0")
        raise ManifestError(
            f"{shown}: path must stay inside the source root", ManifestReason.PATH_ESCAPE
        )
    for count in range(1, len(pure.parts) + 1):
        rel = "/".join(pure.parts[:count])
        mode = entry_mode(root, rel)
        if mode is None:
            raise ManifestError(
                f"path {pure.as_posix()} not found in the revision", ManifestReason.INVALID
            )
        if stat.S_ISLNK(mode):
            raise _symlink_error(rel)
    return pure.as_posix()


def _walk(root: Path, top: str, globs: _Globs) -> Iterator[_Source]:
    """Depth-first in name order, with an explicit stack so deep trees cannot recurse."""
    pending = [top]
    while pending:
        rel = pending.pop()
        mode = entry_mode(root, rel)
        if mode is None:  # listed a moment ago: half a tree must never become desired state
            raise SourceError(f"{rel}: vanished while the revision was read", SourceReason.CORRUPT)
        if stat.S_ISLNK(mode):
            raise _symlink_error(rel)
        if stat.S_ISDIR(mode):
            names = sorted(entry.name for entry in (root / rel).iterdir())
            if _has_kustomization(root, rel, names):
                yield _Source(rel, kustomization=True)
                continue
            children = [child_path(rel, name) for name in names if name != ".git"]
            pending.extend(reversed([child for child in children if not globs.skips(child)]))
        elif rel == top or globs.reads(rel):  # a file named in the config is always read
            if not stat.S_ISREG(mode):
                raise ManifestError(f"{rel}: not a regular file", ManifestReason.INVALID)
            yield _Source(rel)


def _has_kustomization(root: Path, rel: str, names: list[str]) -> bool:
    markers = [name for name in names if name in KUSTOMIZATION_FILES]
    for marker in markers:
        if stat.S_ISLNK(entry_mode(root, child_path(rel, marker)) or 0):
            raise _symlink_error(child_path(rel, marker))
    return bool(markers)


def entry_mode(root: Path, rel: str) -> int | None:
    """The entry's own file mode (a symlink is not followed), or None if it does not exist."""
    try:
        return (root / rel).lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def child_path(rel: str, name: str) -> str:
    """The root-relative posix path of `name` in directory `rel`."""
    return name if rel == "." else f"{rel}/{name}"


def _symlink_error(rel: str) -> ManifestError:
    # The target is not named: it may point at a secret outside the repository.
    return ManifestError(
        f"{rel}: is a symlink; gitopsd never follows symlinks", ManifestReason.SYMLINK
    )


# --- Reading a source ------------------------------------------------------------------


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

    def manifests(self, source: _Source) -> list[Manifest]:
        if source.kustomization:
            path = child_path(source.rel, "kustomization.yaml")
            documents = self._rendered(source.rel, path)
        else:
            path, documents = source.rel, self._file(source.rel)
        self._count(path, documents)
        return _manifests(path, documents)

    def _file(self, rel: str) -> Documents:
        size = (self.root / rel).lstat().st_size
        if rel.endswith(".json"):  # one JSON file is one object
            _check_object_size(rel, size, self.limits)
        allowed = self._admit(rel, size)
        blob = self.blob_ids.get(rel)
        if blob is not None:
            cached = self.cache.lookup(self._key(f"blob:{blob}", rel))
            if cached is not None:
                return cached  # unchanged since an earlier revision: not even read
        data = _read(self.root / rel, rel, allowed)
        content = f"blob:{blob}" if blob is not None else _sha256(data)
        return self._parsed(content, rel, lambda: _decode(data, rel))

    def _rendered(self, rel: str, path: str) -> Documents:
        if self.render is None:
            raise ManifestError(
                f"{path}: {rel} has a kustomization.yaml; rendering it needs kubectl on PATH",
                ManifestReason.INVALID,
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
            raise ManifestError(
                f"{rel}: the revision's manifests reach {_size(self.total_bytes + size)}, "
                f"over the per-revision limit of {_size(limit)} "
                f"({how_to_raise('max_revision_bytes')})",
                ManifestReason.SIZE_LIMIT,
            )
        allowed = limit - self.total_bytes
        self.total_bytes += size
        return allowed

    def _count(self, path: str, documents: Documents) -> None:
        """Each file's parse is bounded by the same limit; here the files add up."""
        limit = self.limits.max_documents
        before, self.total_documents = self.total_documents, self.total_documents + len(documents)
        if self.total_documents > limit:
            line = documents[limit - before][0]  # the first document over the limit
            raise _documents_error(f"{path}:{line}", limit)

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
        raise _symlink_error(rel) from exc  # swapped for a symlink since the walk
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:  # grew since stat
        raise ManifestError(
            f"{rel}: grew past the per-revision limit while being read "
            f"({how_to_raise('max_revision_bytes')})",
            ManifestReason.SIZE_LIMIT,
        )
    return data


def _check_object_size(where: str, size: int, limits: Limits) -> None:
    if size > limits.max_object_bytes:
        raise ManifestError(
            f"{where}: object is {_size(size)}, over the per-object limit of "
            f"{_size(limits.max_object_bytes)} ({how_to_raise('max_object_bytes')})",
            ManifestReason.SIZE_LIMIT,
        )


def _documents_error(where: str, limit: int) -> ManifestError:
    return ManifestError(
        f"{where}: more than {limit} YAML documents, the per-revision limit "
        f"({how_to_raise('max_documents')})",
        ManifestReason.SIZE_LIMIT,
    )


def _size(count: int) -> str:
    """Bytes the way limits are written: 3 MiB, 3.4 MiB, 512 KiB, 100 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            whole, rest = divmod(count, scale)
            return f"{whole} {unit}" if not rest else f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _decode(data: bytes, rel: str) -> str:
    """Strict UTF-8, optionally after a UTF-8 BOM; NUL bytes mean binary or UTF-16."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise _encoding_error(data, rel, nul, "NUL byte")
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skipped:].decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise _encoding_error(data, rel, skipped + exc.start, "invalid UTF-8") from None


def _encoding_error(data: bytes, rel: str, offset: int, what: str) -> ManifestError:
    line = data.count(b"\n", 0, offset) + 1
    return ManifestError(
        f"{rel}:{line}: {what} at byte offset {offset}; manifests must be UTF-8",
        ManifestReason.ENCODING,
    )


# --- Parsing ---------------------------------------------------------------------------


def parse_documents(text: str, path: str, limits: Limits) -> Documents:
    """(1-based start line, data) of each non-empty document; `path` names it in errors."""
    if path.endswith(".json"):
        return _parse_json(text, path, limits)
    try:
        _check_events(text, path, limits)  # cheap, streaming, before any node is built
        return _construct(text, path)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, path, text) from None


def _parse_json(text: str, path: str, limits: Limits) -> Documents:
    if not text.strip():
        return []  # like an empty YAML file
    _check_json_depth(text, path, limits)
    try:
        data = json.loads(
            text, object_pairs_hook=_unique_json_keys(path), parse_constant=_no_constant(path)
        )
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}", ManifestReason.SYNTAX
        ) from None
    except ValueError:  # an integer of more than 4300 digits
        raise ManifestError(f"{path}:1: a number is too large", ManifestReason.INVALID) from None
    return [] if data is None else [(1, data)]


def _unique_json_keys(path: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in pairs:
            if key in mapping:  # json keeps the last silently
                raise ManifestError(
                    f"{path}:1: duplicate key {_name(key)}", ManifestReason.DUPLICATE_KEY
                )
            mapping[key] = value
        return mapping

    return build


def _no_constant(path: str) -> Callable[[str], Any]:
    def refuse(constant: str) -> Any:
        raise ManifestError(f"{path}:1: {constant} is not valid JSON", ManifestReason.SYNTAX)

    return refuse


# Strings are blanked first so brackets inside them do not count; valid JSON strings hold
# no raw newline, so line numbers survive.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _check_json_depth(text: str, path: str, limits: Limits) -> None:
    """json.loads recurses per level and would raise RecursionError on deep input."""
    blanked = _JSON_STRING.sub('""', text)
    depth = 0
    for match in _JSON_BRACKET.finditer(blanked):
        depth += 1 if match.group() in "[{" else -1
        if depth > limits.max_depth:
            line = blanked.count("\n", 0, match.start()) + 1
            raise _depth_error(f"{path}:{line}", limits)


def _depth_error(where: str, limits: Limits) -> ManifestError:
    return ManifestError(
        f"{where}: nested deeper than the limit of {limits.max_depth} levels",
        ManifestReason.DEPTH_LIMIT,
    )


def _syntax_error(exc: yaml.YAMLError, path: str, text: str) -> ManifestError:
    """line:col and libyaml's description; never str(exc), whose snippet quotes the file."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        message = exc.problem or "invalid YAML"
        if exc.context:
            context_line = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
            message += f" ({exc.context}{context_line})"
        return ManifestError(
            f"{path}:{mark.line + 1}:{mark.column + 1}: {message}", ManifestReason.SYNTAX
        )
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return ManifestError(f"{path}:{line}: {exc.reason}", ManifestReason.SYNTAX)
    return ManifestError(f"{path}:1: invalid YAML", ManifestReason.SYNTAX)


# --- YAML, pass 1: limits on the event stream ------------------------------------------

_CORE = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(
    {"!"} | {_CORE + name for name in ("str", "int", "float", "bool", "null", "map", "seq")}
)
_MERGE_TAG = _CORE + "merge"


def _check_events(text: str, path: str, limits: Limits) -> None:
    """Limits the file before composing: libyaml's composer recurses in C per level."""
    budget = _Budget(text, path, limits)
    for event in yaml.parse(text, Loader=_Loader):
        budget.feed(event)


@dataclass
class _Open:
    """A collection being read: its anchor and its size and height so far, aliases expanded."""

    anchor: str | None
    size: int = 1
    height: int = 0


def _offset(mark: Any) -> int:
    """A mark's character offset (libyaml's and PyYAML's marks differ in type only)."""
    return int(mark.index) if mark else 0


class _Budget:
    """Measures documents, aliases, nesting and alias expansion from parser events.

    Each anchor remembers the expanded size and height of its node, so an alias costs
    what it would expand to without anything being expanded: a billion laughs is a few
    big integers here.
    """

    def __init__(self, text: str, path: str, limits: Limits) -> None:
        self.text, self.path, self.limits = text, path, limits
        self.documents = 0
        self.aliases = 0
        self._open: list[_Open] = []
        self._anchors: dict[str, tuple[int, int]] = {}  # anchor -> (size, height)
        self._written = 0  # nodes written in the current document
        self._expanded = 0  # nodes of the current document with aliases expanded
        self._document = yaml.Event()

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self._start_document(event)
        elif isinstance(event, yaml.DocumentEndEvent):
            self._end_document(event)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            self._written += 1
            self._check_tag(event, event.tag)
            self._add(event.anchor, 1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            self._start_collection(event)
        elif isinstance(event, yaml.CollectionEndEvent):
            closed = self._open.pop()
            self._add(closed.anchor, closed.size, closed.height + 1)

    def _start_document(self, event: yaml.Event) -> None:
        self.documents += 1
        if self.documents > self.limits.max_documents:  # one file cannot hold more than all
            raise _documents_error(self._where(event), self.limits.max_documents)
        self._anchors, self._written, self._expanded = {}, 0, 0
        self._document = event  # expansion errors point at the document's start

    def _end_document(self, event: yaml.Event) -> None:
        self._check_object_size(event)
        allowed = self.limits.max_expansion * self._written
        if self._expanded > max(allowed, _EXPANSION_FLOOR):
            raise self._error(
                self._document,
                f"aliases expand {self._written} written nodes to {self._expanded}, "
                f"over {self.limits.max_expansion} times as many",
                ManifestReason.ALIAS_LIMIT,
            )

    def _check_object_size(self, end: yaml.Event) -> None:
        """A document's size is its span in the file; marks count characters, not bytes."""
        start, stop = _offset(self._document.start_mark), _offset(end.end_mark)
        if (stop - start) * 4 > self.limits.max_object_bytes:  # else even 4-byte UTF-8 fits
            size = len(self.text[start:stop].encode())
            _check_object_size(self._where(self._document), size, self.limits)

    def _start_collection(self, event: yaml.CollectionStartEvent) -> None:
        self._written += 1
        self._check_tag(event, event.tag)
        if len(self._open) >= self.limits.max_depth:
            raise _depth_error(self._where(event), self.limits)
        self._open.append(_Open(event.anchor))

    def _alias(self, event: yaml.AliasEvent) -> None:
        self.aliases += 1
        if self.aliases > self.limits.max_aliases:
            raise self._error(
                event, f"more than {self.limits.max_aliases} alias uses", ManifestReason.ALIAS_LIMIT
            )
        if any(collection.anchor == event.anchor for collection in self._open):
            raise self._error(
                event, "an alias refers to its own enclosing node", ManifestReason.ALIAS_LIMIT
            )
        # An undefined anchor is left for the composer to report as a syntax error.
        size, height = self._anchors.get(event.anchor or "", (1, 0))
        if len(self._open) + height > self.limits.max_depth:
            raise _depth_error(self._where(event), self.limits)
        self._add(None, size, height)

    def _add(self, anchor: str | None, size: int, height: int) -> None:
        """Account a finished node to its parent, or to the document if it is the root."""
        if anchor is not None:
            self._anchors[anchor] = (size, height)
        if not self._open:
            self._expanded = size
            return
        parent = self._open[-1]
        parent.size += size
        parent.height = max(parent.height, height)

    def _check_tag(self, event: yaml.Event, tag: str | None) -> None:
        if tag is not None and tag not in _ALLOWED_TAGS:
            shown = tag if len(tag) <= 80 else tag[:77] + "..."
            raise self._error(
                event,
                f"tag {shown} is not allowed; only str, int, float, bool, null, map and seq are",
                ManifestReason.FORBIDDEN_TAG,
            )

    def _where(self, event: yaml.Event) -> str:
        mark = event.start_mark
        return f"{self.path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{self.path}:1"

    def _error(self, event: yaml.Event, message: str, reason: ManifestReason) -> ManifestError:
        return ManifestError(f"{self._where(event)}: {message}", reason)


# --- YAML, pass 2: building the data ---------------------------------------------------

# Like kubectl, dates stay strings; `=` (the YAML 1.1 value key) is a plain string too.
_STRING_LIKE = frozenset({_CORE + "timestamp", _CORE + "value"})


class _Loader(_BaseLoader):
    """A safe loader narrowed to JSON-like core types that rejects duplicate keys."""

    def __init__(self, text: str, path: str = "<string>") -> None:
        super().__init__(text)
        self.path = path
        self._checked: set[yaml.MappingNode] = set()

    def construct_document(self, node: yaml.Node) -> Any:
        self._checked = set()
        return super().construct_document(node)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Flattening rewrites the node with merged keys, so check each one beforehand, once.
        if node not in self._checked:
            self._checked.add(node)
            self._reject_duplicate_keys(node)
        super().flatten_mapping(node)

    def _reject_duplicate_keys(self, node: yaml.MappingNode) -> None:
        """PyYAML keeps the last of two equal keys silently (yaml/pyyaml#165); we refuse."""
        first_lines: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = "<<" if key_node.tag == _MERGE_TAG else self.construct_object(key_node)
            if not isinstance(key, Hashable):
                continue  # construct_mapping reports unhashable keys
            line = key_node.start_mark.line + 1
            if key in first_lines:
                raise ManifestError(
                    f"{self.path}:{line}:{key_node.start_mark.column + 1}: duplicate key "
                    f"{_name(key)} at lines {first_lines[key]} and {line}",
                    ManifestReason.DUPLICATE_KEY,
                )
            first_lines[key] = line


def _forbidden_tag(loader: _Loader, node: yaml.Node) -> Any:
    mark = node.start_mark
    raise ManifestError(
        f"{loader.path}:{mark.line + 1}:{mark.column + 1}: tag {node.tag[:80]} is not allowed",
        ManifestReason.FORBIDDEN_TAG,
    )


def _merge_as_text(loader: _Loader, node: yaml.ScalarNode) -> str:
    # `<<` outside a key position is just text; merge keys are handled by flatten_mapping.
    return loader.construct_yaml_str(node)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _STRING_LIKE]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}
# Explicit tags were refused in pass 1; this narrow table is the second line of defence.
_Loader.yaml_constructors = {
    tag: constructor
    for tag, constructor in _BaseLoader.yaml_constructors.items()
    if tag in _ALLOWED_TAGS
}
_Loader.yaml_multi_constructors = {}
_Loader.add_constructor(None, _forbidden_tag)
_Loader.add_constructor(_MERGE_TAG, _merge_as_text)


def _construct(text: str, path: str) -> Documents:
    """Drive the loader by hand so each document's start line is known."""
    loader = _Loader(text, path)
    documents: Documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            data = _construct_document(loader, node, f"{path}:{line}")
            if data is not None:
                documents.append((line, data))
    finally:
        loader.dispose()
    return documents


def _construct_document(loader: _Loader, node: yaml.Node, where: str) -> Any:
    try:
        return loader.construct_document(node)
    except ValueError:  # int() refuses more than 4300 digits
        raise ManifestError(f"{where}: a number is too large", ManifestReason.INVALID) from None


def _name(key: Any) -> str:
    """A key for an error message: keys may be named, but only briefly."""
    shown = repr(key)
    return shown if len(shown) <= 80 else shown[:77] + "..."


# --- Validating documents --------------------------------------------------------------


def _manifests(path: str, documents: Documents) -> list[Manifest]:
    manifests = []
    for number, (line, document) in enumerate(documents, start=1):
        origin = Origin(path, line)
        for label, body in _expand_list(origin, f"document {number}", document):
            manifests.append(_manifest(origin, label, body))
    return manifests


def _expand_list(origin: Origin, label: str, document: Any) -> list[tuple[str, Any]]:
    """`kind: List` (and FooList with items) stands for its items, as kubectl reads it."""
    body = _mapping(origin, label, document)
    kind, items = body.get("kind"), body.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        return [(f"{label} item {number}", item) for number, item in enumerate(items, start=1)]
    return [(label, body)]


def _manifest(origin: Origin, label: str, document: Any) -> Manifest:
    body = _mapping(origin, label, document)
    api_version = _required(origin, label, body, "apiVersion")
    kind = _required(origin, label, body, "kind")
    metadata = _mapping(origin, f"{label}: metadata", body.get("metadata"))
    name = _required(origin, label, metadata, "name", "metadata.")
    namespace = metadata.get("namespace", "")
    if not isinstance(namespace, str):
        raise _invalid(origin, f"{label}: metadata.namespace must be a string")
    _check_identity(origin, label, GroupKind(group_of(api_version), kind), name, namespace)
    _check_labels(origin, label, metadata)
    if kind == "Secret" and group_of(api_version) == "" and "sops" in body:
        raise _invalid(
            origin, f"{label}: Secret {name} is encrypted with SOPS; gitopsd does not decrypt"
        )
    key = ObjectKey(group_of(api_version), kind, namespace, name)
    return Manifest(key=key, api_version=api_version, body=body, origin=origin)


def _mapping(origin: Origin, label: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise _invalid(origin, f"{label} is not a mapping")
    return value


def _required(
    origin: Origin, label: str, body: dict[Any, Any], field: str, prefix: str = ""
) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise _invalid(origin, f"{label}: {prefix}{field} must be a non-empty string")
    return value


def _check_identity(
    origin: Origin, label: str, group_kind: GroupKind, name: str, namespace: str
) -> None:
    """Names become URL path segments, so the API server's rules are checked before any
    request: a name such as `../../kube-system/configmaps/x` must never reach a URL."""
    problem = name_rule(group_kind).problem(name)
    if problem:
        raise _invalid(origin, f"{label}: {group_kind.kind} metadata.name {shown(name)} {problem}")
    problem = namespace_problem(namespace) if namespace else None
    if problem:
        raise _invalid(origin, f"{label}: metadata.namespace {shown(namespace)} {problem}")


def _check_labels(origin: Origin, label: str, metadata: dict[Any, Any]) -> None:
    """Applyset membership is gitopsd's to set (KEP-3659: treat such a manifest as invalid)."""
    labels = metadata.get("labels", {})
    if not isinstance(labels, dict):
        raise _invalid(origin, f"{label}: metadata.labels must be a mapping")
    for owner_label in (APPLYSET_PART_OF_LABEL, APPLYSET_ID_LABEL):
        if owner_label in labels:
            raise ManifestError(
                f"{origin}: {label}: label {owner_label} is set by gitopsd, not by manifests",
                ManifestReason.OWNER_LABEL,
            )


def _invalid(origin: Origin, message: str) -> ManifestError:
    return ManifestError(f"{origin}: {message}", ManifestReason.INVALID)
