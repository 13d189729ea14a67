"""Ownership, by the ApplySet convention (KEP-3659), so kubectl and gitopsd can audit each other.

Each source has a parent ConfigMap carrying `applyset.kubernetes.io/id` and the group-kinds
and namespaces its members live in; every member carries the label
`applyset.kubernetes.io/part-of: <id>`. gitopsd deletes only live objects that carry its id.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from gitopsd.objects import (
    APPLYSET_GROUP_KINDS_ANNOTATION,
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    APPLYSET_TOOLING_ANNOTATION,
    PRUNE_ANNOTATION,
    Body,
    GroupKind,
    ObjectKey,
)

ADDITIONAL_NAMESPACES_ANNOTATION = "applyset.kubernetes.io/additional-namespaces"
TOOLING = "gitopsd/v1"


@dataclass(frozen=True)
class ApplySet:
    """The parent of one source's objects: a ConfigMap `name` in `namespace`."""

    name: str
    namespace: str

    @property
    def id(self) -> str:
        """base64url(sha256(name.namespace.kind.group)), as KEP-3659 prescribes against spoofing."""
        digest = hashlib.sha256(f"{self.name}.{self.namespace}.ConfigMap.".encode()).digest()
        return f"applyset-{base64.urlsafe_b64encode(digest).decode().rstrip('=')}-v1"

    @property
    def key(self) -> ObjectKey:
        return ObjectKey("", "ConfigMap", self.namespace, self.name)

    def parent(self, group_kinds: Iterable[GroupKind], namespaces: Iterable[str]) -> Body:
        """The parent object to apply, listing where members live (so prune LISTs are cheap)."""
        others = sorted(set(namespaces) - {self.namespace, ""})
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {APPLYSET_ID_LABEL: self.id},
                "annotations": {
                    APPLYSET_TOOLING_ANNOTATION: TOOLING,
                    APPLYSET_GROUP_KINDS_ANNOTATION: ",".join(sorted(map(str, set(group_kinds)))),
                    ADDITIONAL_NAMESPACES_ANNOTATION: ",".join(others),
                },
            },
        }

    def member(self, body: Body) -> Body:
        """A copy of `body` labelled as a member of this set."""
        labelled = copy.deepcopy(body)
        metadata = labelled.setdefault("metadata", {})
        labels = metadata.get("labels") or {}
        metadata["labels"] = {**labels, APPLYSET_PART_OF_LABEL: self.id}
        return labelled

    def owns(self, live: Body) -> bool:
        labels = (live.get("metadata") or {}).get("labels") or {}
        return labels.get(APPLYSET_PART_OF_LABEL) == self.id

    @property
    def selector(self) -> str:
        return f"{APPLYSET_PART_OF_LABEL}={self.id}"


def recorded_group_kinds(parent: Body | None) -> set[GroupKind]:
    """The group-kinds a live parent says its members have (Kind.group, comma-separated)."""
    annotations = ((parent or {}).get("metadata") or {}).get("annotations") or {}
    listed = annotations.get(APPLYSET_GROUP_KINDS_ANNOTATION, "")
    return {_group_kind(text) for text in listed.split(",") if text}


def recorded_namespaces(parent: Body | None, own_namespace: str) -> set[str]:
    annotations = ((parent or {}).get("metadata") or {}).get("annotations") or {}
    listed = annotations.get(ADDITIONAL_NAMESPACES_ANNOTATION, "")
    return {name for name in listed.split(",") if name} | {own_namespace}


def _group_kind(text: str) -> GroupKind:
    kind, _, group = text.partition(".")
    return GroupKind(group, kind)


def prune_disabled(live: Body) -> bool:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return annotations.get(PRUNE_ANNOTATION) == "disabled"


def owner_of(live: Body) -> str | None:
    """The ApplySet id a live object belongs to, if any."""
    labels = (live.get("metadata") or {}).get("labels") or {}
    owner: str | None = labels.get(APPLYSET_PART_OF_LABEL)
    return owner
