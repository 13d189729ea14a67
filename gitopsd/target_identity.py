"""What makes a sync's target another target, so that two never share a record. Pure.

A target is everything that decides which objects a sync writes where: its source and the
paths and files it reads there, the namespace it applies into, and how its charts render
(release, namespace, values files and inline values). The cluster is one too, and needs no
field: a record lives in the cluster it records, so two clusters never share one.

The CLI names a source it is not given a name for after this identity, so two targets
never share an ApplySet parent: `gitopsd sync ./app -n staging --prune` cannot prune what
`gitopsd sync ./app -n prod` applied. Argo CD and Flux get the same from the names people
give their Applications and Kustomizations; `--name` still lets people choose.

The parent keeps the identity as an annotation, to be read by people and by a later sync
(`gitopsd.reconcile.records`): which record an earlier gitopsd wrote, and whether objects
another source owns came from a CLI sync of this very source. Inline values are kept out
of it (they may hold a secret); their keys stand for them there, and the name's hash is
made of the values themselves.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitopsd.objects import ObjectKey

TARGET_ANNOTATION = "gitopsd.io/target"
"""The parent's annotation holding the identity of the target it records."""
SCHEME = "gitopsd-target-v2"
"""Hashed with the identity: no name made this way equals one made by the naming of
gitopsd before targets were told apart (source and paths only), whatever the inputs."""


class Tool(StrEnum):
    """Who syncs the target: a record written by one is found by the others."""

    CLI = "cli"
    DAEMON = "daemon"
    GITSYNC = "gitsync"


@dataclass(frozen=True)
class Charts:
    """How the target's charts render (`config.ChartSettings`, without the version range:
    a new chart version is the same target moving on)."""

    chart: str | None = None
    release: str | None = None
    namespace: str | None = None
    values_files: tuple[str, ...] = ()
    values: str = ""
    """Inline values as canonical JSON: in the hash, never in the annotation."""


@dataclass(frozen=True)
class TargetIdentity:
    tool: Tool
    source: str
    """The repository's URL without user or token (`canonical_url`), a chart repository's,
    or a directory outside git by its absolute path."""
    paths: tuple[str, ...]
    """Where in the source it reads: for a checkout, from the repository's root."""
    namespace: str
    """The namespace objects that name none are applied into."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    charts: Charts = field(default_factory=Charts)
    variables: str = ""
    """Its postBuild as canonical JSON (inline values, the ConfigMaps and Secrets named):
    one base synced with other variables is another target. In the hash only, as values."""

    def digest(self) -> str:
        """Eight hex digits of everything that makes the target, the tool aside (the CLI
        and the daemon syncing one target are one target)."""
        text = json.dumps([SCHEME, self._fields(with_values=True)], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def annotation(self) -> str:
        """The identity as the parent's annotation: compact JSON, inline values by key."""
        fields = {"tool": str(self.tool), **self._fields(with_values=False)}
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))

    def _fields(self, with_values: bool) -> dict[str, Any]:
        charts = self.charts
        values: Any = charts.values if with_values else sorted(_value_keys(charts.values))
        helm = {
            "chart": charts.chart,
            "release": charts.release,
            "namespace": charts.namespace,
            "valuesFiles": list(charts.values_files),
            "values": values,
        }
        found = {
            "source": self.source,
            "paths": sorted(self.paths),
            "namespace": self.namespace,
            "include": sorted(self.include),
            "exclude": sorted(self.exclude),
            "helm": {key: value for key, value in helm.items() if value},
        }
        if self.variables:  # only then: the targets of earlier versions keep their names
            found["variables"] = (
                self.variables if with_values else sorted(_value_keys(self.variables))
            )
        return found


def identity_of(parent: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The identity a parent's annotation holds, as written; None for a parent without one
    (an earlier gitopsd's) or one whose annotation is not an identity."""
    annotations = ((parent or {}).get("metadata") or {}).get("annotations") or {}
    try:
        found = json.loads(str(annotations.get(TARGET_ANNOTATION, "")))
    except ValueError:
        return None
    return found if isinstance(found, dict) and isinstance(found.get("source"), str) else None


def same_place(recorded: Mapping[str, Any], identity: TargetIdentity) -> bool:
    """The recorded identity reads the same source and paths into the same namespace."""
    return (
        recorded.get("source") == identity.source
        and recorded.get("paths") == sorted(identity.paths)
        and recorded.get("namespace") == identity.namespace
    )


def described(recorded: Mapping[str, Any]) -> str:
    """A recorded identity in a few words: "gitopsd sync of https://git.example.com/app
    (paths deploy) into namespace prod"."""
    tool = {"cli": "gitopsd sync", "daemon": "daemon source", "gitsync": "GitSync"}
    paths = ", ".join(str(p) for p in recorded.get("paths") or [])
    helm = recorded.get("helm") or {}
    values = ", ".join(str(v) for v in helm.get("valuesFiles") or [])
    with_values = f" with values {values}" if values else ""
    return (
        f"{tool.get(str(recorded.get('tool')), 'a sync')} of {recorded.get('source')} "
        f"(paths {paths or '.'}{with_values}) into namespace {recorded.get('namespace')}"
    )


def canonical_url(url: str) -> str:
    """The same repository however it was cloned: no user or token, no `.git`, no `/`."""
    url = re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.IGNORECASE)
    return url.rstrip("/").removesuffix(".git")


def paths_from_root(inside: str, paths: Iterable[str]) -> tuple[str, ...]:
    """`paths` relative to a directory `inside` the repository, from its root instead."""
    return tuple(posixpath.normpath(posixpath.join(inside, path)) for path in paths)


def claims(recorded: Iterable[ObjectKey], desired: Iterable[ObjectKey], namespace: str) -> bool:
    """Whether a record an earlier gitopsd wrote under a name every target of its source
    shared is this target's: some object this revision holds is recorded there, and every
    namespace the record puts an object in is one this target writes to. A record of the
    same source synced into another namespace fails the second test, so it is never taken
    (nor its objects pruned) by this target."""
    recorded_keys = set(recorded)
    desired_keys = set(desired)
    ours = {key.namespace for key in desired_keys} | {namespace, ""}
    return bool(recorded_keys & desired_keys) and {k.namespace for k in recorded_keys} <= ours


def _value_keys(values: str, prefix: str = "") -> Iterator[str]:
    """The dotted paths of inline values (`image.tag`), never the values."""
    if values:
        yield from _leaves(json.loads(values), prefix)


def _leaves(tree: Any, prefix: str) -> Iterator[str]:
    if not isinstance(tree, dict) or not tree:
        yield prefix
        return
    for key, value in tree.items():
        yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
