"""What a kustomization may reach: only files of the revision, never the network.

Kustomize's own load restrictor confines *files* to a kustomization's directory, but any
*directory* it is pointed at becomes a new root, wherever it is (`../../../etc`), and a
URL is fetched. So before kustomize runs, every kustomization reachable from the one to
render is read here and each path it names is checked: no remote reference, nothing
absolute, nothing resolving outside the checkout, no symlink on the way. What was reached
is what a private copy for kustomize must hold.

Keys are matched the way kustomize's JSON decoder matches them, case-insensitively, so
`Resources:` cannot slip past. Pure path logic: this module reads the revision's tree and
runs nothing.
"""

from __future__ import annotations

import posixpath
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests import KUSTOMIZATION_FILES, Tree, child_path, parse_documents

MAX_KUSTOMIZATION_BYTES = 1024 * 1024
"""A kustomization or env file larger than this is refused before it is read."""

# Fields whose entries kustomize may load as another kustomization (a new root).
ROOT_FIELDS = ("resources", "components", "bases", "generators", "transformers", "validators")
# Fields whose entries kustomize loads as files: URLs are fetched, so they are checked too.
FILE_FIELDS = ("crds", "configurations", "patchesStrategicMerge")
PATH_ITEM_FIELDS = ("patches", "patchesJson6902", "replacements")  # items carry `path`
GENERATOR_FIELDS = ("configMapGenerator", "secretGenerator")
GENERATOR_FILE_KEYS = ("files", "envs", "env")

_REMOTE_PREFIXES = ("git::", "git@", "github.com", "gitlab.com", "bitbucket.org")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[^=#\s][^=]*=(.*)$")
_LIMITS = Limits()
_REMOTE = "is remote; gitopsd renders only what the revision holds, and never fetches"
_SYMLINK = "passes through a symlink; gitopsd never follows symlinks"


@dataclass
class Reach:
    """What kustomize may read when it renders one kustomization."""

    paths: set[str]
    """Every kustomization directory it reaches, and every path they name (files or
    directories, inside the revision): what a private copy for kustomize must hold."""
    secrets: list[str]
    """Generator values (literals, env-file values) kustomize's errors must never show."""


@dataclass(frozen=True)
class _Kustomization:
    directory: str  # root-relative posix path
    file: str  # root-relative posix path of its kustomization file, named in errors
    data: dict[Any, Any]


def check(tree: Tree, directory: str) -> Reach:
    """Checks every kustomization reachable from `directory` (root-relative posix path).

    Raises ManifestError naming the kustomization file and the offending path. Returns
    what kustomize may read, and the values its errors must never show.
    """
    pending, seen, reach = [directory], set[str](), Reach(set(), [])
    while pending:
        rel = pending.pop()
        if rel in seen:
            continue  # a cycle or a diamond: each kustomization is checked once
        seen.add(rel)
        reach.paths.add(rel)
        kustomization = _read(tree, rel)
        for target in _root_entries(tree, kustomization):
            if stat.S_ISDIR(tree.mode(target) or 0):
                pending.append(target)
            else:
                reach.paths.add(target)
        for name, entry in _file_entries(kustomization):
            reach.paths.add(_local(tree, kustomization, name, entry))
        reach.secrets.extend(_generator_values(tree, kustomization))
    return reach


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
    data = kustomization.data
    for field in FILE_FIELDS:
        yield from ((field, entry) for entry in _strings(_field(data, field)))
    for field in PATH_ITEM_FIELDS:
        for item in _mappings(_field(data, field)):
            yield from ((field, path) for path in _strings(_field(item, "path")))
    openapi = _field(data, "openapi")
    if isinstance(openapi, dict):
        yield from (("openapi", path) for path in _strings(_field(openapi, "path")))
    for field in GENERATOR_FIELDS:
        for item in _mappings(_field(data, field)):
            for key in GENERATOR_FILE_KEYS:
                for entry in _strings(_field(item, key)):
                    yield f"{field}.{key}", entry.partition("=")[2] or entry


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


def _read(tree: Tree, directory: str) -> _Kustomization:
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
    documents = parse_documents(_text(tree, file), file, _LIMITS)
    data = documents[0][1] if len(documents) == 1 else None
    if not isinstance(data, dict):
        raise ManifestError(
            f"{file}: a kustomization must be one YAML mapping", ManifestReason.INVALID
        )
    return _Kustomization(directory, file, data)


def _generator_values(tree: Tree, kustomization: _Kustomization) -> Iterator[str]:
    """Values a ConfigMap or Secret generator gets from literals and env files."""
    for field in GENERATOR_FIELDS:
        for item in _mappings(_field(kustomization.data, field)):
            for literal in _strings(_field(item, "literals")):
                yield literal.partition("=")[2] or literal  # kustomize echoes a bad literal
            for key in ("envs", "env"):
                for entry in _strings(_field(item, key)):
                    yield from _env_values(tree, _local(tree, kustomization, field, entry))


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


def _mappings(value: Any) -> list[dict[Any, Any]]:
    return [item for item in _list(value) if isinstance(item, dict)]


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
