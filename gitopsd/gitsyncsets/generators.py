"""A set's elements, pure: what each generator gives, from what the daemon read for it.

- `list`: its elements, as written;
- `git`: a directory of the repository's revision each, matching a path glob of its
  `directories` and none of those marked `exclude` (an exclusion wins wherever it is
  listed), with the variables `path` (from the repository's root) and `basename` (its last
  name);
- `clusters`: a cluster each that the daemon's configuration declares and allows for the
  set's namespace, with the variable `cluster` (its name);
- `matrix`: every pair of its two generators' elements, their variables merged (a variable
  both give is an error: which would win is not obvious).

A glob's `*` and `?` match within one name, never a `/`, nor a name's leading `.` (as a
shell's globs); `**` matches any number of names.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gitopsd.configfile.clusters import DeclaredCluster
from gitopsd.errors import ConfigError
from gitopsd.gitsyncsets import MAX_ELEMENTS
from gitopsd.gitsyncsets.spec import (
    ClustersGenerator,
    Directory,
    Generator,
    GitGenerator,
    GitSyncSet,
    ListGenerator,
)

Listings = Mapping[tuple[str, str], Sequence[str]]
"""The directories of each git generator's revision, by its (url, ref)."""


@dataclass(frozen=True)
class Element:
    values: Mapping[str, str]
    origin: str
    """Which generator gave it, and its values: how an error names it."""


def elements(
    gitsyncset: GitSyncSet, listings: Listings, clusters: Sequence[DeclaredCluster] = ()
) -> list[Element]:
    """Every element of the set's generators, in their order; raises ConfigError past
    MAX_ELEMENTS, or for a generator the daemon cannot give elements for."""
    found: list[Element] = []
    for n, generator in enumerate(gitsyncset.generators):
        where = f"GitSyncSet {gitsyncset.key}: spec.generators[{n}]"
        found += _of(generator, where, listings, clusters, gitsyncset.namespace)
        _bounded(len(found), where)
    return found


def _of(
    generator: Generator,
    where: str,
    listings: Listings,
    clusters: Sequence[DeclaredCluster],
    namespace: str,
) -> list[Element]:
    if isinstance(generator, ListGenerator):
        return [_element(values, f"{where}.list") for values in generator.elements]
    if isinstance(generator, GitGenerator):
        found = listings.get((generator.url, generator.ref))
        if found is None:
            raise ConfigError(f"{where}.git: the repository's directories were not read")
        return [
            _element({"path": path, "basename": path.rpartition("/")[2]}, f"{where}.git")
            for path in matching(found, generator.directories)
        ]
    if isinstance(generator, ClustersGenerator):
        allowed = [c.name for c in clusters if c.allows(namespace)]
        return [_element({"cluster": name}, f"{where}.clusters") for name in allowed]
    first, second = (
        _of(inner, f"{where}.matrix.generators[{n}]", listings, clusters, namespace)
        for n, inner in enumerate(generator.generators)
    )
    _bounded(len(first) * len(second), f"{where}.matrix")
    return [_merged(a, b, f"{where}.matrix") for a in first for b in second]


def _element(values: Mapping[str, str], generator: str) -> Element:
    return Element(dict(values), f"{generator} {_shown(values)}")


def _merged(first: Element, second: Element, where: str) -> Element:
    both = sorted(set(first.values) & set(second.values))
    if both:
        raise ConfigError(
            f"{where}: both generators give the variable {', '.join(both)} "
            f"({_shown(first.values)} and {_shown(second.values)}): rename one"
        )
    return _element({**first.values, **second.values}, where)


def _bounded(count: int, where: str) -> None:
    if count > MAX_ELEMENTS:
        raise ConfigError(
            f"{where}: {count} elements, over the most a GitSyncSet may generate, "
            f"{MAX_ELEMENTS}: nothing was applied or deleted"
        )


def _shown(values: Mapping[str, str]) -> str:
    text = ", ".join(f"{name}={value}" for name, value in sorted(values.items()))
    return "{" + (text if len(text) <= 200 else text[:197] + "...") + "}"


def matching(directories: Iterable[str], globs: Sequence[Directory]) -> list[str]:
    """The directories a path glob of `globs` matches and none excluded, sorted."""
    included = [g.pattern for g in globs if not g.exclude]
    excluded = [g.pattern for g in globs if g.exclude]
    return sorted(
        path
        for path in directories
        if any(glob_matches(path, g) for g in included)
        and not any(glob_matches(path, g) for g in excluded)
    )


def glob_matches(path: str, glob: str) -> bool:
    """Whether `path` (names joined by `/`) matches `glob` (see the module's docstring): the
    glob's names run as a state machine over the path's, in time bounded by the product of
    their lengths, whatever the glob."""
    globs = glob.strip("/").split("/")
    states = _past_any_names({0}, globs)
    for name in path.strip("/").split("/"):
        following = {
            at + (globs[at] != "**")
            for at in states
            if at < len(globs) and (globs[at] == "**" or _name_matches(name, globs[at]))
        }
        states = _past_any_names(following, globs)
    return len(globs) in states


def _past_any_names(states: set[int], globs: list[str]) -> set[int]:
    """`states`, and for each at a `**`, the states past it: it may match no name at all."""
    found = set(states)
    for at in states:
        while at < len(globs) and globs[at] == "**":
            at += 1
            found.add(at)
    return found


def _name_matches(name: str, glob: str) -> bool:
    if name.startswith(".") and not glob.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, glob)
