"""What a kustomization may reach: only files of the revision, never the network.

Kustomize's own load restrictor confines *files* to a kustomization's directory, but any
*directory* it is pointed at becomes a new root, wherever it is (`../../../etc`), and a
URL is fetched. So before kustomize runs, every kustomization reachable from the one to
render is read here and each path it names is checked: no remote reference, nothing
absolute, nothing resolving outside the checkout, no symlink on the way. That holds for
every file kustomize loads as configuration, not only kustomizations: the generator,
transformer and validator configs they name, as files or inline, are read too, and every
field in them that names a file (`files`, `envs`, `path`, `paths`, values files) is checked
the same way. What was reached is what a private copy for kustomize must hold; the values
of generator literals and env files are kept, so that kustomize's errors can be scrubbed of
them. How many kustomizations one render reaches is bounded (`max_kustomizations`).

Keys are matched the way kustomize's JSON decoder matches them, case-insensitively, so
`Resources:` cannot slip past. Pure path logic: this module reads the revision's tree and
runs nothing. (The network is closed to kustomize anyway: `offline`.)
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitopsd.config import ChartInflation, Limits, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.kustomize.helm_charts import inflations
from gitopsd.manifests import KUSTOMIZATION_FILES, Tree, child_path, parse_documents

MAX_KUSTOMIZATION_BYTES = 1024 * 1024
"""A kustomization or env file larger than this is refused before it is read."""

# Fields whose entries kustomize may load as another kustomization (a new root).
ROOT_FIELDS = ("resources", "components", "bases", "generators", "transformers", "validators")
# Of those, the fields whose file entries (and inline entries) are plugin configurations.
CONFIG_FIELDS = ("generators", "transformers", "validators")
# Fields whose entries kustomize loads as files: URLs are fetched, so they are checked too.
FILE_FIELDS = ("crds", "configurations", "patchesStrategicMerge")
# Keys that name files, wherever they are nested in a kustomization (patches, replacements,
# openapi, generators, helm charts) or in the config of one of kustomize's builtin
# generators and transformers (ConfigMapGenerator, SecretGenerator, PatchTransformer,
# PatchStrategicMergeTransformer, PatchJson6902Transformer, ReplacementTransformer,
# HelmChartInflationGenerator); `files` entries may be `key=path`.
FILE_KEYS = frozenset(
    {"path", "paths", "files", "envs", "env", "valuesfile", "additionalvaluesfiles", "charthome"}
)

_REMOTE_PREFIXES = ("git::", "git@", "github.com", "gitlab.com", "bitbucket.org")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[^=#\s][^=]*=(.*)$")
_REMOTE = "is remote; gitopsd renders only what the revision holds, and never fetches"
_SYMLINK = "passes through a symlink; gitopsd never follows symlinks"


@dataclass(frozen=True)
class Inflating:
    """A kustomization with `helmCharts`: gitopsd renders them and rewrites it to read the
    result instead (`helm_charts`)."""

    file: str
    directory: str
    data: dict[Any, Any]
    charts: tuple[ChartInflation, ...]


@dataclass
class Reach:
    """What kustomize may read when it renders one kustomization."""

    paths: set[str]
    """Every kustomization directory it reaches, and every path they name (files or
    directories, inside the revision): what a private copy for kustomize must hold."""
    secrets: list[str]
    """Generator values (literals, env-file values) kustomize's errors must never show."""
    inflating: list[Inflating] = dataclasses.field(default_factory=list)
    """The kustomizations whose `helmCharts` gitopsd renders."""


@dataclass(frozen=True)
class _Kustomization:
    """A kustomization, or a plugin configuration it names (read the same way)."""

    directory: str  # root-relative posix path its paths are relative to
    file: str  # where it was written, named in errors
    data: Any


def check(tree: Tree, directory: str, limits: Limits) -> Reach:
    """Checks every kustomization reachable from `directory` (root-relative posix path), and
    every plugin configuration they name.

    Raises ManifestError naming the kustomization file and the offending path, or the limit
    on kustomizations. Returns what kustomize may read, and the values its errors must
    never show.
    """
    pending, seen, reach = [directory], set[str](), Reach(set(), [])
    while pending:
        rel = pending.pop()
        if rel in seen:
            continue  # a cycle or a diamond: each kustomization is checked once
        seen.add(rel)
        if len(seen) > limits.max_kustomizations:
            raise _too_many(directory, limits.max_kustomizations)
        reach.paths.add(rel)
        kustomization = _read(tree, rel, limits)
        for target in _root_entries(tree, kustomization):
            if stat.S_ISDIR(tree.mode(target) or 0):
                pending.append(target)
            else:
                reach.paths.add(target)
        for name, entry in _file_entries(kustomization):
            reach.paths.add(_local(tree, kustomization, name, entry))
        for config in (kustomization, *_configs(tree, kustomization, limits)):
            _check_files(tree, config, reach)
        _check_charts(tree, kustomization, reach)
    return reach


def _check_charts(tree: Tree, kustomization: _Kustomization, reach: Reach) -> None:
    """A kustomization's `helmCharts`: each chart of the revision must lie inside it."""
    charts = inflations(kustomization.file, kustomization.directory, kustomization.data)
    for chart in charts:
        if chart.chart is not None:
            relative = posixpath.relpath(chart.chart, kustomization.directory)
            _local(tree, kustomization, "helmCharts", relative)
    if charts:
        reach.inflating.append(
            Inflating(
                kustomization.file, kustomization.directory, kustomization.data, tuple(charts)
            )
        )


def _configs(tree: Tree, kustomization: _Kustomization, limits: Limits) -> Iterator[_Kustomization]:
    """The plugin configurations a kustomization names (its generator, transformer and
    validator entries that are files of the revision, or inline YAML), one per document:
    each named as where it was written, its paths relative to the kustomization's
    directory, as kustomize loads them."""
    for name in CONFIG_FIELDS:
        for entry in _strings(_field(kustomization.data, name)):
            if "\n" in entry:
                text, where = entry, f"{kustomization.file} ({name}, inline)"
            else:
                target = _local(tree, kustomization, name, entry)
                if not stat.S_ISREG(tree.mode(target) or 0):
                    continue  # a kustomization directory, checked as one
                text, where = _text(tree, target), target
            for _, document in parse_documents(text, where, limits):
                yield _Kustomization(kustomization.directory, where, document)


def _check_files(tree: Tree, config: _Kustomization, reach: Reach) -> None:
    """Every file a kustomization or plugin configuration names under one of FILE_KEYS is
    checked and reached; its generator literals and env values are kept as secrets (a bad
    literal is echoed whole by kustomize)."""
    for field, value in _walk(config.data):
        folded = field.rpartition(".")[2].casefold()
        if folded == "literals":
            reach.secrets.extend(item.partition("=")[2] or item for item in _strings(value))
        if folded not in FILE_KEYS:
            continue
        for entry in _strings(value):
            path = (entry.partition("=")[2] or entry) if folded == "files" else entry
            target = _local(tree, config, field, path)
            reach.paths.add(target)
            if folded in ("envs", "env"):
                reach.secrets.extend(_env_values(tree, target))


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every value of the mappings nested in `value`, at any depth, with the keys that lead
    to it (`secretGenerator.envs`)."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        where, current = pending.pop()
        if isinstance(current, dict):
            for key, item in current.items():
                field = f"{where}.{key}" if where else str(key)
                yield field, item
                pending.append((field, item))
        elif isinstance(current, list):
            pending.extend((where, item) for item in current)


def _too_many(directory: str, limit: int) -> ManifestError:
    return ManifestError(
        f"{directory}: reaches more than {limit} kustomizations in one render "
        f"({how_to_raise('max_kustomizations')})",
        ManifestReason.SIZE_LIMIT,
    )


def _root_entries(tree: Tree, kustomization: _Kustomization) -> Iterator[str]:
    """The paths of entries that kustomize loads as a kustomization when they are a
    directory (a new root), or as a file."""
    for name in ROOT_FIELDS:
        for entry in _strings(_field(kustomization.data, name)):
            if "\n" in entry:
                continue  # an inline generator or transformer config, not a path
            target = _local(tree, kustomization, name, entry)
            if tree.mode(target) is None:
                raise _error(kustomization, name, entry, "is not in the revision")
            yield target


def _file_entries(kustomization: _Kustomization) -> Iterator[tuple[str, str]]:
    for field in FILE_FIELDS:
        yield from ((field, entry) for entry in _strings(_field(kustomization.data, field)))


def _local(tree: Tree, kustomization: _Kustomization, field: str, entry: str) -> str:
    """The entry as a root-relative posix path, if it stays inside the checkout."""
    if "\n" in entry:
        return kustomization.directory  # inline content (a patch, a config), not a path
    if is_remote(entry):
        raise _error(kustomization, field, entry, _REMOTE, ManifestReason.REMOTE)
    if "\0" in entry or posixpath.isabs(entry):
        raise _error(kustomization, field, entry, "must be a path inside the checkout")
    target = posixpath.normpath(posixpath.join(kustomization.directory, entry))
    if target == ".." or target.startswith("../"):
        raise _error(kustomization, field, entry, "resolves outside the checkout")
    parts = target.split("/")
    for count in range(1, len(parts) + 1):
        mode = tree.mode("/".join(parts[:count]))
        if mode is not None and stat.S_ISLNK(mode):
            raise _error(kustomization, field, entry, _SYMLINK, ManifestReason.SYMLINK)
    return target


def is_remote(entry: str) -> bool:
    """Whether kustomize would fetch the entry: a URL, a git host path or an scp-like address."""
    return (
        "://" in entry
        or "?" in entry
        or "//" in entry
        or entry.startswith(_REMOTE_PREFIXES)
        or _SCP_LIKE.match(entry) is not None
    )


def _read(tree: Tree, directory: str, limits: Limits) -> _Kustomization:
    names = [name for name in KUSTOMIZATION_FILES if tree.mode(child_path(directory, name))]
    if not names:
        raise ManifestError(
            f"{directory}: referenced as a kustomization but has none", ManifestReason.INVALID
        )
    file = child_path(directory, names[0])
    if stat.S_ISLNK(tree.mode(file) or 0):
        raise ManifestError(
            f"{file}: is a symlink; gitopsd never follows symlinks", ManifestReason.SYMLINK
        )
    documents = parse_documents(_text(tree, file), file, limits)
    data = documents[0][1] if len(documents) == 1 else None
    if not isinstance(data, dict):
        raise ManifestError(
            f"{file}: a kustomization must be one YAML mapping", ManifestReason.INVALID
        )
    return _Kustomization(directory, file, data)


def _env_values(tree: Tree, rel: str) -> Iterator[str]:
    mode = tree.mode(rel)
    if mode is None or not stat.S_ISREG(mode):
        return  # kustomize reports the missing file itself
    for line in _text(tree, rel).splitlines():
        if found := _ENV_LINE.match(line):
            yield found.group(1).strip()


def _text(tree: Tree, rel: str) -> str:
    """The file, refused before it is read when it is too large for a kustomization input."""
    if tree.size(rel) > MAX_KUSTOMIZATION_BYTES:
        raise _too_large(rel)
    data = tree.read(rel, MAX_KUSTOMIZATION_BYTES)
    if len(data) > MAX_KUSTOMIZATION_BYTES:  # grew since its size was taken
        raise _too_large(rel)
    return data.decode("utf-8", errors="replace")


def _too_large(rel: str) -> ManifestError:
    return ManifestError(
        f"{rel}: over the limit of {MAX_KUSTOMIZATION_BYTES} bytes for a kustomization input",
        ManifestReason.SIZE_LIMIT,
    )


def _field(data: dict[Any, Any], name: str) -> Any:
    """The value of `name`, matched like Go's encoding/json: case-insensitively."""
    folded = name.casefold()
    values = [value for key, value in data.items() if str(key).casefold() == folded]
    if len(values) > 1:
        return [item for value in values for item in _list(value)]
    return values[0] if values else None


def _strings(value: Any) -> list[str]:
    return [item for item in _list(value) if isinstance(item, str)]


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _error(
    kustomization: _Kustomization,
    field: str,
    entry: str,
    problem: str,
    reason: ManifestReason = ManifestReason.PATH_ESCAPE,
) -> ManifestError:
    shown = entry.replace("\0", "\\0")[:200]
    return ManifestError(f"{kustomization.file}: {field} entry {shown!r} {problem}", reason)
