"""getCurrent: the live objects a source cares about, through one narrow reader.

Two readers: `ListReader` reads the cluster afresh (the CLI: a LIST per kind and
namespace, a GET only for a lone object), `CacheReader` reads the daemon's watch cache
(memory only, once synced). Both answer with the same `Live`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gitopsd import inventory
from gitopsd.apply import run_concurrently
from gitopsd.changes import Target
from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.cache import LiveCache
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import Body, GroupKind, ObjectKey, key_of

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
NAMESPACES = GroupKind("", "Namespace")
CACHE_SYNC_SECONDS = 30.0
Targets = Mapping[ObjectKey, Target]


@dataclass
class Live:
    parent: Body | None
    owned: dict[ObjectKey, Body]
    """Live objects that carry this source's ApplySet label (a claim anyone can copy)."""
    desired: dict[ObjectKey, Body | None]
    """The live object for every desired key (None: absent)."""
    recorded: inventory.Record = field(default_factory=dict)
    """What the parent records this source applied; empty when it cannot be read (a sync
    then refuses the parent)."""

    def find(self, key: ObjectKey) -> Body | None:
        """The live object of a desired or an owned key, if it exists."""
        return self.desired.get(key) or self.owned.get(key)

    def proven(self, key: ObjectKey) -> bool:
        """Labelled, and recorded as applied by this source with the uid it has now."""
        body = self.owned.get(key)
        return body is not None and self.recorded.get(key) == inventory.uid_prefix(body)


class Reader(Protocol):
    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        """The parent, the objects it owns and every desired object that exists."""

    def written(self) -> None:
        """The parent was (re)written: the next read must read it again."""


@dataclass
class ListReader:
    """Reads the cluster afresh: the CLI's reader. Each kind and namespace is listed once
    (owned objects by label where git puts nothing); a lone desired object is got. Objects
    are kept as projections (cluster.projection): what drift and ownership read."""

    cluster: Cluster
    concurrency: int = 16

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        """Cluster-scoped kinds first: a Namespace git declares and the cluster lacks holds
        nothing yet, so its kinds are not listed (on a cold sync, most LISTs)."""
        parent = self.cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name)
        record = record_of(parent)
        group_kinds, namespaces = scope(applyset, parent, record, targets)
        preferred = self.cluster.discovery.preferred
        resources = [r for gk in sorted(group_kinds) if (r := preferred(gk))]
        wanted = _by_scope(targets)
        # without a parent nothing is owned: no labelled LIST
        selector = applyset.selector if parent is not None else None
        cluster_scoped = [(r, "") for r in resources if not r.namespaced]
        objects = self._list_all(selector, cluster_scoped, wanted)
        absent = {k.name for k in targets if k.group_kind == NAMESPACES and k not in objects}
        namespaced = [
            (resource, namespace)
            for resource in resources
            if resource.namespaced
            for namespace in sorted(namespaces - absent)
        ]
        objects |= self._list_all(selector, namespaced, wanted)
        return live_from(applyset, parent, record, objects, targets)

    def written(self) -> None:
        """Every read is fresh."""

    def _list_all(
        self,
        selector: str | None,
        lists: list[tuple[Resource, str]],
        wanted: Mapping[tuple[GroupKind, str], list[Target]],
    ) -> dict[ObjectKey, Body]:
        found = run_concurrently(
            lists, lambda each: self._list(selector, *each, wanted), self.concurrency
        )
        return {key_of(body): body for bodies in found for body in bodies}

    def _list(
        self,
        selector: str | None,
        resource: Resource,
        namespace: str,
        wanted: Mapping[tuple[GroupKind, str], list[Target]],
    ) -> list[Body]:
        """The owned and desired objects of one kind in one namespace: one unlabelled LIST
        where git wants several, else the labelled LIST (`selector`; None: nothing can be
        owned yet) and a GET for the lone one."""
        desired = wanted.get((GroupKind(resource.group, resource.kind), namespace), [])
        cluster = self.cluster
        if len(desired) > 1:
            return cluster.list_objects(resource, namespace, projected=True)
        owned = cluster.list_objects(resource, namespace, selector, True) if selector else []
        keys = {key_of(body) for body in owned}
        lone = [t for t in desired if t.key not in keys and t.resource is not None]
        gotten = [cluster.get(t.served, t.key.namespace, t.key.name, projected=True) for t in lone]
        return owned + [body for body in gotten if body is not None]


def _by_scope(targets: Targets) -> dict[tuple[GroupKind, str], list[Target]]:
    grouped: dict[tuple[GroupKind, str], list[Target]] = defaultdict(list)
    for key, target in targets.items():
        grouped[(key.group_kind, key.namespace)].append(target)
    return grouped


@dataclass
class CacheReader:
    """Reads the daemon's watch cache; the parent is read once per write of it."""

    cluster: Cluster
    cache: LiveCache
    parent: Body | None = None
    recorded: inventory.Record = field(default_factory=dict)
    stale: bool = True

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        if self.stale:
            self.parent = self.cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name)
            self.recorded = record_of(self.parent)
            self.stale = False
        group_kinds, namespaces = scope(applyset, self.parent, self.recorded, targets)
        preferred = self.cluster.discovery.preferred
        resources = [r for gk in sorted(group_kinds) if (r := preferred(gk))]
        self.cache.ensure(resources, namespaces, targets)
        if not self.cache.wait_synced(CACHE_SYNC_SECONDS):
            raise ClusterError("the watch cache did not sync in time", ClusterReason.TIMEOUT)
        objects = self.cache.objects()
        return live_from(applyset, self.parent, self.recorded, objects, targets)

    def written(self) -> None:
        self.stale = True


def live_from(
    applyset: inventory.ApplySet,
    parent: Body | None,
    record: inventory.Record,
    objects: Mapping[ObjectKey, Body],
    targets: Targets,
) -> Live:
    """Live state from the objects seen: every owned one, and every desired one that exists."""
    owned = {key: body for key, body in objects.items() if applyset.owns(body)}
    return Live(parent, owned, {key: objects.get(key) for key in targets}, record)


def record_of(parent: Body | None) -> inventory.Record:
    """The parent's record, decoded once per read of the parent; empty when it cannot be
    read (a sync then refuses the parent)."""
    try:
        return inventory.recorded(parent)
    except ValueError:
        return {}


def scope(
    applyset: inventory.ApplySet,
    parent: Body | None,
    record: inventory.Record,
    targets: Targets,
) -> tuple[set[GroupKind], set[str]]:
    """The group-kinds and namespaces this source's objects may live in: as recorded (the
    record itself, so an edited annotation cannot hide a member from prune; the annotations
    for parents written before there was a record) and where git puts them now."""
    keys = [*record, *targets]
    group_kinds = inventory.recorded_group_kinds(parent) | {key.group_kind for key in keys}
    namespaces = inventory.recorded_namespaces(parent, applyset.namespace)
    return group_kinds, namespaces | {key.namespace for key in keys if key.namespace}
