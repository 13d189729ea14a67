"""The vocabulary shared by every module: object identity, manifests and ownership names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIELD_MANAGER = "gitopsd"
"""The one stable field manager for every server-side apply gitopsd makes."""

APPLYSET_PART_OF_LABEL = "applyset.kubernetes.io/part-of"
APPLYSET_ID_LABEL = "applyset.kubernetes.io/id"
APPLYSET_TOOLING_ANNOTATION = "applyset.kubernetes.io/tooling"
APPLYSET_GROUP_KINDS_ANNOTATION = "applyset.kubernetes.io/contains-group-kinds"
PRUNE_ANNOTATION = "gitopsd.io/prune"
"""``gitopsd.io/prune: disabled`` on a live object keeps it from ever being pruned."""

Body = dict[str, Any]
"""A Kubernetes object as plain JSON-like data."""


@dataclass(frozen=True, order=True)
class GroupKind:
    group: str
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


@dataclass(frozen=True, order=True)
class ObjectKey:
    """Identity of an object, without its API version: apps/v1beta1 and apps/v1 are one object."""

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


@dataclass(frozen=True)
class Origin:
    """Where a manifest was written: a path relative to the source root and a 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Manifest:
    """One desired object as read from the source."""

    key: ObjectKey
    api_version: str
    body: Body
    origin: Origin


def key_of(body: Body) -> ObjectKey:
    """The identity of an object as the API returns it."""
    metadata = body.get("metadata") or {}
    group = group_of(str(body.get("apiVersion", "")))
    return ObjectKey(group, str(body.get("kind")), metadata.get("namespace", ""), metadata["name"])


def group_of(api_version: str) -> str:
    """The API group of an apiVersion: "apps" for "apps/v1", "" (core) for "v1"."""
    group, _, _version = api_version.rpartition("/")
    return group
