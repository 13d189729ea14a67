"""getCurrent: the live objects a source cares about, through one narrow reader.

Two readers: `ListReader` reads the cluster afresh (the CLI: a LIST per kind and
namespace, a GET only for a lone object), `CacheReader` reads the daemon's watch cache
(memory only, once synced). Both answer with the same `Live`.

What they read is `watched`: each kind in each namespace where git or the source's own
record puts an object, within the source's `Bounds` (its confinement, for a GitSync acting
with the daemon's rights, and a limit). Never what the parent's annotations claim: whoever
may edit the parent (a GitSync's tenant) could make the daemon list and watch anything.
The record is in the parent too, so it is bounded and confined as well: an entry outside
the confinement is neither read nor pruned (and is dropped when the record is next written).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gitopsd import inventory
from gitopsd.changes import Live, Target
from gitopsd.cluster import Cluster, Resource, run_concurrently
from gitopsd.cluster.watches import LiveCache, Scope
from gitopsd.config import Limits, SyncSettings, how_to_raise
from gitopsd.errors import ClusterError, ClusterReason, ManifestError, ManifestReason
from gitopsd.objects import Body, GroupKind, ObjectKey, key_of
from gitopsd.resources import CONFIG_MAPS, NAMESPACE

CACHE_SYNC_SECONDS = 30.0
Targets = Mapping[ObjectKey, Target]


@dataclass(frozen=True)
class Bounds:
    """Where a source's reader may look."""

    confined_to: str | None = None
    """The one namespace its objects may lie in (SyncSettings.confined_to), or None."""
    max_watches: int = Limits.max_watches

    @classmethod
    def of(cls, settings: SyncSettings, limits: Limits) -> Bounds:
        return cls(settings.confined_to, limits.max_watches)

    def admits(self, key: ObjectKey) -> bool:
        return self.confined_to is None or key.namespace == self.confined_to

    def record(self, parent: Body | None) -> inventory.Record:
        """The parent's record, decoded once per read of the parent, without what lies
        outside the confinement; empty when it cannot be read (a sync then refuses the
        parent)."""
        try:
            recorded = inventory.recorded(parent)
        except ValueError:
            return {}
        return {key: uid for key, uid in recorded.items() if self.admits(key)}


class Reader(Protocol):
    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        """The parent, the objects it owns and every desired object that exists."""

    def written(self, answer: Body | None) -> None:
        """The parent was (re)written, and answered `answer`: the parent now (None: the
        write failed, yet may have reached the server, so the next read reads it)."""


@dataclass
class ListReader:
    """Reads the cluster afresh: the CLI's reader. Each kind and namespace is listed once
    (owned objects by label where git puts nothing); a lone desired object is got. Objects
    are kept as projections (cluster.projection): what drift and ownership read."""

    cluster: Cluster
    concurrency: int = 16
    bounds: Bounds = Bounds()

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        """Cluster-scoped kinds first: a Namespace git declares and the cluster lacks holds
        nothing yet, so its kinds are not listed (on a cold sync, most LISTs)."""
        parent = self.cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name)
        record = self.bounds.record(parent)
        lists = sorted(watched(self.bounds, self.cluster, record, targets).items())
        wanted = _by_scope(targets)
        # without a parent nothing is owned: no labelled LIST
        selector = applyset.selector if parent is not None else None
        cluster_scoped = [(r, "") for _, r in lists if not r.namespaced]
        objects = self._list_all(selector, cluster_scoped, wanted)
        absent = {k.name for k in targets if k.group_kind == NAMESPACE and k not in objects}
        namespaced = [(r, ns) for (_, ns), r in lists if r.namespaced and ns not in absent]
        objects |= self._list_all(selector, namespaced, wanted)
        unserved = unserved_kinds(self.cluster, kinds_of(record))
        return live_from(applyset, parent, record, objects, targets, unserved)

    def written(self, answer: Body | None) -> None:
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
    """Reads the daemon's watch cache; the parent is read once, then taken from the
    answer to each write of it (read again after a write that failed)."""

    cluster: Cluster
    cache: LiveCache
    bounds: Bounds = Bounds()
    parent: Body | None = None
    recorded: inventory.Record = field(default_factory=dict)
    recorded_kinds: frozenset[GroupKind] = frozenset()
    """The group-kinds of the record, taken once per read of the parent, not per check."""
    stale: bool = True
    watching: tuple[Targets, inventory.Record, float | None] | None = None
    """What the scopes the cache watches were worked out from last: git's targets and the
    record (the very objects) and when discovery was read (None: work them out again)."""

    def read(self, applyset: inventory.ApplySet, targets: Targets) -> Live:
        if self.stale:
            self._keep(self.cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name))
        self._watch(targets)
        if not self.cache.wait_synced(CACHE_SYNC_SECONDS):
            raise ClusterError("the watch cache did not sync in time", ClusterReason.TIMEOUT)
        objects = self.cache.objects()
        unserved = unserved_kinds(self.cluster, self.recorded_kinds)
        return live_from(applyset, self.parent, self.recorded, objects, targets, unserved)

    def _watch(self, targets: Targets) -> None:
        """Has the cache watch what the targets and the record need, worked out again only
        once either of them or discovery moved (a drift check at 10,000 objects asked it
        every time), or while a kind of them is not served (it may be served since)."""
        discovery, watching = self.cluster.discovery, self.watching
        if watching is not None and self._unmoved(watching, targets):
            self.cache.ensure_open()
            return
        loaded = discovery.loaded_at  # before it is asked: a read since moves it
        needed = watched(self.bounds, self.cluster, self.recorded, targets)
        self.cache.ensure(needed, targets)
        kinds = self.recorded_kinds | {key.group_kind for key in targets}
        served = not unserved_kinds(self.cluster, kinds)
        self.watching = (targets, self.recorded, loaded) if served else None

    def _unmoved(
        self, watching: tuple[Targets, inventory.Record, float | None], targets: Targets
    ) -> bool:
        """Whether the targets and the record are the very ones, and discovery was not read
        again, since the scopes were worked out."""
        then_targets, then_record, then_loaded = watching
        loaded = self.cluster.discovery.loaded_at
        return then_targets is targets and then_record is self.recorded and then_loaded == loaded

    def written(self, answer: Body | None) -> None:
        if answer is None:
            self.stale = True
        else:
            self._keep(answer)

    def _keep(self, parent: Body | None) -> None:
        self.parent = parent
        self.recorded = self.bounds.record(parent)
        self.recorded_kinds = kinds_of(self.recorded)
        self.stale = False


def live_from(
    applyset: inventory.ApplySet,
    parent: Body | None,
    record: inventory.Record,
    objects: Mapping[ObjectKey, Body],
    targets: Targets,
    unserved: frozenset[GroupKind],
) -> Live:
    """Live state from the objects seen: every owned one, and every desired one that exists."""
    owned = {key: body for key, body in objects.items() if applyset.owns(body)}
    desired = {key: objects.get(key) for key in targets}
    return Live(parent, owned, desired, record, unserved)


def kinds_of(record: inventory.Record) -> frozenset[GroupKind]:
    return frozenset(key.group_kind for key in record)


def unserved_kinds(cluster: Cluster, group_kinds: Iterable[GroupKind]) -> frozenset[GroupKind]:
    """Those of `group_kinds` (a record's) that discovery cannot resolve now."""
    return frozenset(gk for gk in group_kinds if cluster.discovery.preferred(gk) is None)


def watched(
    bounds: Bounds, cluster: Cluster, record: inventory.Record, targets: Targets
) -> dict[Scope, Resource]:
    """Each kind in each namespace ("" for a cluster-scoped kind) where git or this
    source's own record puts an object, within its bounds: what is listed and watched.
    Raises ManifestError past the limit."""
    pairs = {(key.group_kind, key.namespace) for key in (*record, *targets) if bounds.admits(key)}
    served = {gk: cluster.discovery.preferred(gk) for gk in {gk for gk, _ in pairs}}
    found: dict[Scope, Resource] = {}
    for group_kind, namespace in pairs:
        resource = served[group_kind]
        if resource is None or (resource.namespaced and not namespace):
            continue  # not served now: nothing to list
        found[(group_kind, namespace if resource.namespaced else "")] = resource
    if len(found) > bounds.max_watches:
        raise ManifestError(
            f"this source's objects lie in {len(found)} kinds x namespaces (as git and its "
            f"ApplySet parent's record say), over the limit of {bounds.max_watches}: each is "
            f"a list and a watch ({how_to_raise('max_watches')})",
            ManifestReason.SIZE_LIMIT,
        )
    return found
