"""The vocabulary shared by every module: object identity, manifests and ownership names."""

from __future__ import annotations

import marshal
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

FIELD_MANAGER = "gitopsd"
"""The one stable field manager for every server-side apply gitopsd makes."""

APPLYSET_PART_OF_LABEL = "applyset.kubernetes.io/part-of"
APPLYSET_ID_LABEL = "applyset.kubernetes.io/id"
APPLYSET_TOOLING_ANNOTATION = "applyset.kubernetes.io/tooling"
APPLYSET_GROUP_KINDS_ANNOTATION = "applyset.kubernetes.io/contains-group-kinds"
PRUNE_ANNOTATION = "gitopsd.io/prune"
"""``gitopsd.io/prune: disabled`` on a live object keeps it from ever being pruned."""
SYNC_WAVE_ANNOTATION = "gitopsd.io/sync-wave"
"""``gitopsd.io/sync-wave: "<int>"`` orders applies within a revision: lower waves first,
each once the one before is healthy (default 0)."""
ARGOCD_SYNC_WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"
"""Argo CD's sync wave, read where gitopsd's is not written: the same meaning."""
SYNC_WAVE = re.compile(r"^[-+]?[0-9]{1,9}$")
"""A wave number as the annotation writes it: a whole number, bounded so it stays an int."""

Body = dict[str, Any]
"""A Kubernetes object as plain JSON-like data."""


@dataclass(frozen=True, order=True, slots=True)
class GroupKind:
    group: str
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


@dataclass(frozen=True, order=True, slots=True)
class ObjectKey:
    """Identity of an object, without its API version: apps/v1beta1 and apps/v1 are one object.
    Slotted, as a source holds several per object (git's, the cache's, the record's)."""

    group: str
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str

    @property
    def group_kind(self) -> GroupKind:
        return GroupKind(self.group, self.kind)

    def __str__(self) -> str:
        parts = [self.group, self.kind, self.namespace, self.name]
        return "/".join(part for part in parts if part)

    def reference(self, version: str) -> dict[str, str]:
        """The object as a program reads it (the JSON contract, a status): every part
        apart, "" where it has none (the core group, a cluster-scoped object's namespace)."""
        return {
            "group": self.group,
            "version": version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a manifest was written: a path relative to the source root and a 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        """file:line; a setting that made the object (line 0) by its name alone."""
        return f"{self.path}:{self.line}" if self.line else self.path


def pack(body: Body) -> bytes:
    """`body` as compact bytes, for bodies held long (a revision's, for as long as it is
    current): marshal's bytes take about a quarter of the memory of the dicts, lists and
    strings they stand for. Format 2 writes every object out where it appears, so a body
    whose YAML aliases shared one object unpacks with copies of its own."""
    return marshal.dumps(body, 2)


def unpack(packed: bytes) -> Body:
    """A new body from `pack`'s bytes: nothing else holds it, so it may be changed."""
    body: Body = marshal.loads(packed)  # noqa: S302 - bytes this process packed
    return body


@dataclass(frozen=True, init=False, slots=True)
class Manifest:
    """One desired object as read from the source. Its body is kept packed; each read of
    `body` unpacks a copy of its own."""

    key: ObjectKey
    api_version: str
    packed: bytes = field(repr=False)
    origin: Origin

    def __init__(self, key: ObjectKey, api_version: str, body: Body, origin: Origin) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "api_version", api_version)
        object.__setattr__(self, "packed", pack(body))
        object.__setattr__(self, "origin", origin)

    @property
    def body(self) -> Body:
        return unpack(self.packed)


@dataclass(frozen=True)
class Resource:
    """A kind as the cluster serves it: where its objects live in the REST API."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "", name: str = "") -> str:
        """The REST path of the collection, or of one object when `name` is given."""
        base = ["apis", self.group, self.version] if self.group else ["api", self.version]
        scope = ["namespaces", namespace] if self.namespaced and namespace else []
        segments = [*base, *scope, self.plural, *([name] if name else [])]
        return "".join(f"/{path_segment(segment)}" for segment in segments)


def path_segment(text: str) -> str:
    """`text` as one URL path segment, whatever it holds. Names are validated when read;
    this is the second line: `/`, `?` and `%` are encoded, and so are the dots of `.` and
    `..`, which urllib3 would otherwise resolve into a different path."""
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return quote(text, safe="")


def wave_of(body: Body) -> int:
    """The sync wave of an object; 0 when it names none (or, on a live object someone
    edited, none that is valid: manifests are checked when read)."""
    named = named_wave(body)
    return 0 if named is None else named


def named_wave(body: Body) -> int | None:
    """The sync wave an object's annotations name (gitopsd's, else Argo CD's), if any."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, dict):
        return None
    text = annotations.get(SYNC_WAVE_ANNOTATION, annotations.get(ARGOCD_SYNC_WAVE_ANNOTATION))
    return int(text) if isinstance(text, str) and SYNC_WAVE.match(text) else None


def owner_of(body: Body | None) -> str | None:
    """The id of the ApplySet that labels an object as its own, if any."""
    labels = ((body or {}).get("metadata") or {}).get("labels") or {}
    owner: str | None = labels.get(APPLYSET_PART_OF_LABEL)
    return owner


def key_of(body: Body) -> ObjectKey:
    """The identity of an object as the API returns it."""
    metadata = body.get("metadata") or {}
    group = group_of(str(body.get("apiVersion", "")))
    return ObjectKey(group, str(body.get("kind")), metadata.get("namespace", ""), metadata["name"])


def group_of(api_version: str) -> str:
    """The API group of an apiVersion: "apps" for "apps/v1", "" (core) for "v1"."""
    group, _, _version = api_version.rpartition("/")
    return group


def version_of(api_version: str) -> str:
    """The version of an apiVersion: "v1" for "apps/v1" and for "v1"."""
    return api_version.rpartition("/")[2]


def body_version(body: Body | None) -> str:
    """The version an object's body names (`v1`); "" for no body, or one that names none."""
    return version_of(str(body.get("apiVersion", ""))) if body else ""
