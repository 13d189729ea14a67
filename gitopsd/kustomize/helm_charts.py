"""A kustomization's `helmCharts`, read as gitopsd renders them.

kustomize inflates each entry by running helm (pulling the chart first when it names a
repository), which the renderers' sandbox forbids: no network, no helm for kustomize. So
gitopsd renders each entry with its own chart renderer (the chart checked, fetched under a
chart source's rules, helm sandboxed) and hands kustomize the result as one more resource
of the kustomization, in place of the entry: the kustomization's own transformers
(namespace, labels, patches) then apply to it as to every resource.

The fields are kustomize's (`name`, `repo`, `version`, `releaseName`, `namespace`,
`valuesFile`, `additionalValuesFiles`, `valuesInline`, `includeCRDs`, `skipHooks`, and
`helmGlobals.chartHome`), matched case-insensitively as kustomize's decoder does. Where
gitopsd departs: the release name defaults to the chart's name (kustomize asks helm to
generate a random one, which would drift on every render); chart tests are never
rendered; `.Capabilities` are the cluster's. A field gitopsd does not render as kustomize
would (`valuesMerge` other than override, `nameTemplate`, `kubeVersion`, `apiVersions`,
`devel`, `extraArgs`, `configHome`) is refused naming it, never ignored. Pure: it reads the
kustomization's parsed data and names paths; `references` checks them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from gitopsd.config import ChartInflation, ChartSettings
from gitopsd.configfile.helm import inline_values
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.manifests import child_path

DEFAULT_CHART_HOME = "charts"
FIELDS = frozenset(
    {
        "name",
        "repo",
        "version",
        "releasename",
        "namespace",
        "valuesfile",
        "additionalvaluesfiles",
        "valuesinline",
        "valuesmerge",
        "includecrds",
        "skiphooks",
        "skiptests",
    }
)


def inflations(file: str, directory: str, data: dict[Any, Any]) -> list[ChartInflation]:
    """The charts the kustomization in `file` (its directory `directory`) inflates."""
    entries = _get(data, "helmCharts") or []
    if not isinstance(entries, list):
        raise ManifestError(f"{file}: helmCharts must be a list")
    globals_ = _get(data, "helmGlobals") or {}
    if not isinstance(globals_, dict):
        raise ManifestError(f"{file}: helmGlobals must be a mapping")
    _refuse_unknown(globals_, {"charthome"}, f"{file}: helmGlobals")
    home = _get(globals_, "chartHome") or DEFAULT_CHART_HOME
    if not isinstance(home, str):
        raise ManifestError(f"{file}: helmGlobals.chartHome must be a string")
    return [
        _inflation(entry, f"{file}: helmCharts[{at}]", directory, home)
        for at, entry in enumerate(entries)
    ]


def _inflation(entry: Any, where: str, directory: str, home: str) -> ChartInflation:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: must be a mapping")
    _refuse_unknown(entry, FIELDS, where)
    name = _string(entry, "name", where)
    if not name or "/" in name:
        raise ManifestError(f"{where}: name must be a chart's name")
    if (_get(entry, "valuesMerge") or "override") != "override":
        raise ManifestError(f"{where}: valuesMerge: gitopsd renders only 'override' (the default)")
    repository = _string(entry, "repo", where)
    values_files = [_string(entry, "valuesFile", where), *_strings(entry, where)]
    settings = ChartSettings(
        release_name=_string(entry, "releaseName", where) or name,
        namespace=_string(entry, "namespace", where) or None,
        values=_inline(_get(entry, "valuesInline"), where),
    )
    return ChartInflation(
        where=where,
        name=name,
        chart=None if repository else _join(directory, home, name),
        repository=repository,
        version=_string(entry, "version", where) or "*",
        settings=settings,
        values_files=tuple(_join(directory, path) for path in values_files if path),
        include_crds=_get(entry, "includeCRDs") is True,
        skip_hooks=_get(entry, "skipHooks") is True,
    )


def _join(directory: str, *parts: str) -> str:
    """A path the kustomization names, root-relative (`references` checked it stays inside)."""
    return posixpath.normpath(posixpath.join(directory, *parts))


def _refuse_unknown(entry: dict[Any, Any], known: frozenset[str] | set[str], where: str) -> None:
    unknown = sorted(str(key) for key in entry if str(key).casefold() not in known)
    if unknown:
        raise ManifestError(
            f"{where}: {', '.join(unknown)[:200]}: not a field gitopsd renders as kustomize "
            "would, so it is refused rather than ignored"
        )


def _inline(values: Any, where: str) -> str:
    try:
        return inline_values(values, f"{where}: valuesInline")
    except ConfigError as error:
        raise ManifestError(str(error)) from None


def _string(entry: dict[Any, Any], key: str, where: str) -> str:
    value = _get(entry, key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ManifestError(f"{where}: {key} must be a string")
    return value


def _strings(entry: dict[Any, Any], where: str) -> Iterator[str]:
    values = _get(entry, "additionalValuesFiles") or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise ManifestError(f"{where}: additionalValuesFiles must be a list of paths")
    yield from values


def _get(data: dict[Any, Any], key: str) -> Any:
    """The value of `key`, matched like kustomize's decoder: case-insensitively."""
    folded = key.casefold()
    return next((value for name, value in data.items() if str(name).casefold() == folded), None)


def generated_file(directory: str, at: int, name: str) -> str:
    """Where the inflated output of entry `at` is written for kustomize to read."""
    return child_path(directory, f".gitopsd-helm-{at}-{name}.yaml")


def without_charts(data: dict[Any, Any], generated: list[str]) -> dict[Any, Any]:
    """The kustomization as kustomize is to read it: its `helmCharts` and `helmGlobals`
    gone, the files holding their rendered output added to its resources."""
    dropped = {"helmcharts", "helmglobals"}
    kept = {key: value for key, value in data.items() if str(key).casefold() not in dropped}
    resources = next((key for key in kept if str(key).casefold() == "resources"), "resources")
    existing = kept.get(resources) or []
    kept[resources] = [*(existing if isinstance(existing, list) else [existing]), *generated]
    return kept
