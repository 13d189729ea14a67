"""A source's `helm` settings: how `helm template` renders its charts, and which chart of a
chart repository the source is, when it is one.

The command line builds the same settings from its flags (`--helm-set` paths become the
inline values mapping), so one set of rules holds for both, and for a GitSync's spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from gitopsd.config import ChartSettings
from gitopsd.configfile.fields import mapping, namespace, strings
from gitopsd.errors import ConfigError
from gitopsd.names import CHART_NAME, HELM_RELEASE, NameRule, shown
from gitopsd.versions import parse_range

HELM_KEYS = {"releaseName", "releaseNamespace", "valuesFiles", "values", "chart", "version"}
MAX_INLINE_VALUES_BYTES = 256 * 1024
"""Inline values are configuration, not data: a larger mapping belongs in a values file."""


def chart_settings(value: Any, where: str) -> ChartSettings:
    raw = mapping(value or {}, where, HELM_KEYS)
    return ChartSettings(
        release_name=release_name(raw.get("releaseName"), f"{where}: releaseName"),
        namespace=_release_namespace(raw, where),
        values_files=strings(raw, "valuesFiles", where, ()),
        values=inline_values(raw.get("values"), f"{where}: values"),
        chart=chart_name(raw.get("chart"), f"{where}: chart"),
        version=version_range(raw.get("version", ChartSettings.version), f"{where}: version"),
    )


def chart_name(value: Any, where: str) -> str | None:
    """The name of a chart in a chart repository, or None (the source is git's)."""
    return _named(value, CHART_NAME, where)


def version_range(value: Any, where: str) -> str:
    """A chart version range as helm's --version reads it ("*": the highest release)."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string")
    try:
        parse_range(value)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    return value


def _release_namespace(raw: dict[str, Any], where: str) -> str | None:
    if "releaseNamespace" not in raw:
        return None  # the source's namespace
    return namespace(raw, "releaseNamespace", where, "")


def release_name(value: Any, where: str) -> str | None:
    return _named(value, HELM_RELEASE, where)


def _named(value: Any, rule: NameRule, where: str) -> str | None:
    """`value` if it is None or a string that follows `rule`."""
    if value is None:
        return None
    problem = rule.problem(value) if isinstance(value, str) else "must be a string"
    if problem:
        raise ConfigError(f"{where}: {shown(str(value))} {problem}")
    return str(value)


def inline_values(value: Any, where: str) -> str:
    """The values mapping as canonical JSON ("" for none)."""
    if value is None or value == {}:
        return ""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_INLINE_VALUES_BYTES:
        raise ConfigError(
            f"{where}: {len(text)} bytes as JSON, over the limit of {MAX_INLINE_VALUES_BYTES}; "
            "put them in a values file in the repository"
        )
    return text


def set_values(assignments: Iterable[str], where: str) -> dict[str, Any]:
    """`a.b=value` assignments as a nested mapping; a value that reads as JSON (a number,
    true, false, null, a quoted string, a list or a mapping) is that, any other a string."""
    values: dict[str, Any] = {}
    for assignment in assignments:
        path, equals, text = assignment.partition("=")
        keys = path.split(".")
        if not equals or not all(keys):
            raise ConfigError(f"{where}: {shown(assignment)}: expected KEY.PATH=VALUE")
        node = values
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{where}: {shown(path)}: {key} is set to a value already")
            node = child
        node[keys[-1]] = _scalar(text)
    return values


def _scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
