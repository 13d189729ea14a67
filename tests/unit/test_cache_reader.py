"""The daemon's reader of its watch cache works out what to watch only when what it is
worked out from moved: git's targets, the source's record, or discovery's map."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from gitopsd.changes import Target
from gitopsd.cluster import Cluster
from gitopsd.cluster.watches import LiveCache
from gitopsd.objects import GroupKind, ObjectKey, Origin, Resource
from gitopsd.reconcile.live import CacheReader

CONFIG_MAP = Resource("", "v1", "ConfigMap", "configmaps", True)
WIDGET = GroupKind("example.com", "Widget")


@dataclass
class StubDiscovery:
    served: dict[GroupKind, Resource] = field(
        default_factory=lambda: {GroupKind("", "ConfigMap"): CONFIG_MAP}
    )
    loaded_at: float | None = 1.0

    def preferred(self, group_kind: GroupKind) -> Resource | None:
        return self.served.get(group_kind)


@dataclass
class StubCache:
    ensured: list[set[Any]] = field(default_factory=list)
    opened: int = 0

    def ensure(self, needed: dict[Any, Resource], wanted: object) -> None:
        self.ensured.append(set(needed))

    def ensure_open(self) -> None:
        self.opened += 1


@dataclass
class StubCluster:
    discovery: StubDiscovery = field(default_factory=StubDiscovery)


def targets(*keys: ObjectKey) -> dict[ObjectKey, Target]:
    return {key: Target(key, {}, Origin("app.yaml", 1), None) for key in keys}


def reader() -> tuple[CacheReader, StubCache, StubDiscovery]:
    cluster, cache = StubCluster(), StubCache()
    made = CacheReader(cast(Cluster, cluster), cast(LiveCache, cache), stale=False)
    return made, cache, cluster.discovery


def test_what_to_watch_is_worked_out_again_only_once_its_sources_moved() -> None:
    read, cache, discovery = reader()
    wanted = targets(ObjectKey("", "ConfigMap", "app", "web"))

    read._watch(wanted)
    read._watch(wanted)  # a drift check: the same targets and record
    assert len(cache.ensured) == 1 and cache.opened == 1

    read._watch(targets(ObjectKey("", "ConfigMap", "app", "web")))  # a new revision
    read.recorded = {}  # the parent written again
    read._watch(wanted)
    discovery.loaded_at = 2.0  # discovery read again
    read._watch(wanted)
    assert len(cache.ensured) == 4 and cache.opened == 1


def test_a_kind_not_served_has_what_to_watch_worked_out_at_each_read() -> None:
    """A CRD may be established between two drift checks: its kind is watched from then."""
    read, cache, discovery = reader()
    widget = ObjectKey("example.com", "Widget", "app", "w")
    wanted = targets(ObjectKey("", "ConfigMap", "app", "web"), widget)

    read._watch(wanted)
    discovery.served[WIDGET] = Resource("example.com", "v1", "Widget", "widgets", True)
    read._watch(wanted)
    read._watch(wanted)

    assert cache.ensured == [
        {(GroupKind("", "ConfigMap"), "app")},
        {(GroupKind("", "ConfigMap"), "app"), (WIDGET, "app")},
        # served since: worked out no more
    ]
