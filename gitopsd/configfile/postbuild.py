"""A source's `postBuild:` (Flux's Kustomization postBuild): the variables its objects are
expanded with, as `config.Substitution`."""

from __future__ import annotations

import re
from typing import Any

from gitopsd.config import Substitution, VariablesFrom
from gitopsd.configfile.fields import boolean, mapping
from gitopsd.errors import ConfigError
from gitopsd.names import DNS1123_SUBDOMAIN, shown

KEYS = {"substitute", "substituteFrom", "strict"}
REFERENCE_KEYS = {"kind", "name", "optional"}
KINDS = ("ConfigMap", "Secret")
VARIABLE_NAME = re.compile(r"^[_A-Za-z][_A-Za-z0-9]*$")
MAX_VALUES = 1000
MAX_SOURCES = 32


def substitution(value: Any, where: str) -> Substitution:
    raw = mapping(value or {}, where, KEYS)
    return Substitution(
        values=_values(raw.get("substitute") or {}, f"{where}: substitute"),
        sources=_sources(raw.get("substituteFrom") or [], f"{where}: substituteFrom"),
        strict=boolean(raw, "strict", where, Substitution.strict),
    )


def variable_name(name: str, where: str) -> str:
    """A name Flux's variables may have (its kustomize-controller's rule)."""
    if not VARIABLE_NAME.match(name):
        raise ConfigError(
            f"{where}: {shown(name)} is not a variable name ({VARIABLE_NAME.pattern})"
        )
    return name


def _values(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or len(value) > MAX_VALUES:
        raise ConfigError(f"{where}: a mapping of at most {MAX_VALUES} names to strings")
    for name, text in value.items():
        if not isinstance(text, str):
            raise ConfigError(
                f"{where}: {variable_name(str(name), where)}: a string is expected (quote "
                f'numbers and booleans: {name}: "3")'
            )
    return tuple(sorted((variable_name(str(n), where), str(t)) for n, t in value.items()))


def _sources(value: Any, where: str) -> tuple[VariablesFrom, ...]:
    if not isinstance(value, list) or len(value) > MAX_SOURCES:
        raise ConfigError(f"{where}: a list of at most {MAX_SOURCES} ConfigMaps and Secrets")
    return tuple(_source(entry, f"{where}[{n}]") for n, entry in enumerate(value))


def _source(value: Any, where: str) -> VariablesFrom:
    raw = mapping(value, where, REFERENCE_KEYS)
    kind, name = raw.get("kind"), raw.get("name")
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind: ConfigMap or Secret, got {shown(str(kind))}")
    if not isinstance(name, str) or DNS1123_SUBDOMAIN.problem(name):
        raise ConfigError(f"{where}: name: {shown(str(name))} is not a name")
    return VariablesFrom(kind, name, boolean(raw, "optional", where, False))
