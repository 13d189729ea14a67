"""A GitSyncSet object read into what the controller acts on: its generators, template,
deletion guards and interval. The API server has checked the shapes the CRD declares;
what spans fields, and what a stored object of an older CRD may lack, is checked here.
Errors name the set and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitopsd.configfile.postbuild import VARIABLE_NAME
from gitopsd.errors import ConfigError
from gitopsd.gitsync import DELETE_POLICY_ANNOTATION
from gitopsd.gitsyncsets import MAX_ELEMENTS, MAX_TEMPLATE_BYTES
from gitopsd.names import shown
from gitopsd.objects import Body
from gitopsd.quantities import parse_duration
from gitopsd.settings_table import INTERVAL, PRUNE_BUDGET, REF

__all__ = ["DELETE_POLICY_ANNOTATION", "GitSyncSet", "read"]


@dataclass(frozen=True)
class ListGenerator:
    elements: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class Directory:
    pattern: str
    """A glob of directories, relative to the repository's root."""
    exclude: bool = False


@dataclass(frozen=True)
class GitGenerator:
    repository: Body
    """As a GitSync's spec.repository: url, ref, secretRef."""
    directories: tuple[Directory, ...]

    @property
    def url(self) -> str:
        return str(self.repository["url"])

    @property
    def ref(self) -> str:
        return str(self.repository.get("ref") or REF.default)


@dataclass(frozen=True)
class ClustersGenerator:
    """One element per cluster the daemon's configuration declares for the set's namespace."""


@dataclass(frozen=True)
class Matrix:
    generators: tuple[Generator, Generator]


Generator = ListGenerator | GitGenerator | ClustersGenerator | Matrix


@dataclass(frozen=True)
class Guards:
    """What a pass that deletes GitSyncs must pass, as a GitSync's prune guards."""

    allow_empty: bool = False
    """Delete every GitSync when the generators give no element at all (usually a broken
    generator: a repository emptied, a glob mistyped)."""
    budget_percent: float = PRUNE_BUDGET.default
    """Most GitSyncs one pass may delete, as a share of those the set owns (one always)."""
    allow_mass_deletion: bool = False
    """Delete past the budget."""


@dataclass(frozen=True)
class GitSyncSet:
    namespace: str
    name: str
    uid: str
    generation: int
    generators: tuple[Generator, ...]
    template: Body
    guards: Guards
    interval_seconds: float
    service_account: str | None
    """Whom its git generators' Secrets are read as (as a GitSync's serviceAccountName)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def git_generators(self) -> list[GitGenerator]:
        """Its git generators, those inside a matrix too."""
        return [g for g in _flattened(self.generators) if isinstance(g, GitGenerator)]


def read(body: Body) -> GitSyncSet:
    """The set in `body`; raises ConfigError naming the field it cannot use."""
    metadata = body.get("metadata") or {}
    namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
    where = f"GitSyncSet {namespace}/{name}: spec"
    spec = body.get("spec") or {}
    listed = spec.get("generators") or []
    if not isinstance(listed, list) or not listed:
        raise ConfigError(f"{where}: generators: at least one generator is required")
    generators = tuple(_generator(g, f"{where}: generators[{n}]") for n, g in enumerate(listed))
    guards = spec.get("guards") or {}
    return GitSyncSet(
        namespace=namespace,
        name=name,
        uid=str(metadata.get("uid", "")),
        generation=int(metadata.get("generation") or 0),
        generators=generators,
        template=_template(spec.get("template"), f"{where}: template"),
        guards=Guards(
            allow_empty=guards.get("allowEmpty") is True,
            budget_percent=float(guards.get("deletionBudgetPercent", Guards.budget_percent)),
            allow_mass_deletion=guards.get("allowMassDeletion") is True,
        ),
        interval_seconds=_interval(spec.get("interval"), f"{where}: interval"),
        service_account=spec.get("serviceAccountName") or None,
    )


def _generator(raw: Any, where: str, nested: bool = False) -> Generator:
    kinds = [kind for kind in ("list", "git", "clusters", "matrix") if kind in (raw or {})]
    if len(kinds) != 1:
        raise ConfigError(f"{where}: exactly one of list, git, clusters, matrix is required")
    [kind] = kinds
    inner = raw[kind] if isinstance(raw[kind], dict) else {}
    if kind == "list":
        return ListGenerator(_elements(inner.get("elements"), f"{where}.list.elements"))
    if kind == "git":
        return _git(inner, f"{where}.git")
    if kind == "clusters":
        return ClustersGenerator()
    if nested:
        raise ConfigError(f"{where}: a matrix inside a matrix is not supported")
    pair = inner.get("generators") or []
    if not isinstance(pair, list) or len(pair) != 2:
        raise ConfigError(f"{where}.matrix.generators: exactly two generators are required")
    first, second = (
        _generator(g, f"{where}.matrix.generators[{n}]", True) for n, g in enumerate(pair)
    )
    return Matrix((first, second))


def _elements(raw: Any, where: str) -> tuple[dict[str, str], ...]:
    if not isinstance(raw, list) or len(raw) > MAX_ELEMENTS:
        raise ConfigError(f"{where}: a list of at most {MAX_ELEMENTS} elements is required")
    return tuple(_element(element, f"{where}[{n}]") for n, element in enumerate(raw))


def _element(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{where}: an element is a mapping of variables to strings")
    for name, value in raw.items():
        if not VARIABLE_NAME.match(str(name)):
            raise ConfigError(f"{where}: {shown(str(name))} is not a variable name")
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {name}: a variable's value is a string")
    return dict(raw)


def _git(raw: Body, where: str) -> GitGenerator:
    repository = raw.get("repository") or {}
    if not isinstance(repository, dict) or not repository.get("url"):
        raise ConfigError(f"{where}.repository.url: the repository's URL is required")
    if str(repository["url"]).startswith("oci://"):
        raise ConfigError(f"{where}.repository.url: a git repository's, not an OCI artifact's")
    listed = raw.get("directories") or []
    directories = tuple(
        Directory(str(d.get("path") or ""), d.get("exclude") is True) for d in listed
    )
    if not any(not d.exclude and d.pattern for d in directories):
        raise ConfigError(f"{where}.directories: at least one path not excluded is required")
    return GitGenerator(repository, directories)


def _template(raw: Any, where: str) -> Body:
    if not isinstance(raw, dict) or not isinstance(raw.get("spec"), dict):
        raise ConfigError(f"{where}: spec: a GitSync's spec is required")
    if not (raw.get("metadata") or {}).get("name"):
        raise ConfigError(f"{where}: metadata.name is required (each element's must differ)")
    size = len(json.dumps(raw))
    if size > MAX_TEMPLATE_BYTES:
        raise ConfigError(
            f"{where}: {size} bytes, over the most a template may be, {MAX_TEMPLATE_BYTES}"
        )
    return raw


def _interval(raw: Any, where: str) -> float:
    if raw is None:
        return float(INTERVAL.default)
    seconds = parse_duration(str(raw))
    if seconds is None or seconds < 1:
        raise ConfigError(f"{where}: {shown(str(raw))} is not a duration of 1s or more")
    return seconds


def _flattened(generators: tuple[Generator, ...]) -> list[Generator]:
    found: list[Generator] = []
    for generator in generators:
        if isinstance(generator, Matrix):
            found += _flattened(generator.generators)
        else:
            found.append(generator)
    return found
