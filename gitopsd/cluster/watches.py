"""Watches shared by the daemon's sources: one informer per identity, resource and scope.

A source reads its live objects through a `LiveCache`, a view of the informers it joined:
its own objects (labelled by its ApplySet) and those git declares (to see them before they
are its own, and conflicts), within the kinds and namespaces it needs. An informer is shared
by every source of one identity (the daemon's, or the ServiceAccount a GitSync
impersonates): it watches the resource in all namespaces where that identity may list and
watch it there (asked once), else in one namespace. A thousand GitSyncs of ConfigMaps then
cost one watch, not a thousand; each keeps only what its audience keeps, and a view sees
only the namespaces it joined for, so sharing widens no source's sight.

A source that joins an informer already running catches up with a list of its namespace
(the informer skipped what nobody kept then); one that leaves drops what nobody keeps any
more, and the last to leave stops the informer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.cache import Informer, Owned, WatchEvents
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.managed_fields import owned_version
from gitopsd.objects import Body, GroupKind, ObjectKey, owner_of

REFUSAL_CHECK_SECONDS = 0.1
STOPPED = "the watch cache stopped: this source is stopping"
"""What a read gets from a cache that stops meanwhile (the process shutting down, the source
retired), as a fenced ClusterError: the reconcile ends there, as at its next write."""

Scope = tuple[GroupKind, str]
"""A group/kind and a namespace ("" for cluster-scoped kinds): what a source watches."""
Acting = tuple[str, str]
"""A cluster's name and the identity its requests act as there."""
Shared = tuple[Acting, Resource, str]
"""An identity in a cluster, a resource and the namespace watched ("": all): one informer."""
Index = TypeVar("Index")


@dataclass(eq=False)
class Audience:
    """The views that keep what one informer sees: by the ApplySet and namespace of their
    own objects, and by the keys their git declares."""

    owners: dict[Owned, set[LiveCache]] = field(default_factory=dict)
    wanting: dict[ObjectKey, set[LiveCache]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keepers(self, key: ObjectKey, body: Body | None) -> set[LiveCache]:
        if body is None:
            return set()
        with self.lock:
            wanting = self.wanting.get(key, set())
            return wanting | self.owners.get((owner_of(body) or "", key.namespace), set())

    def keep(self, key: ObjectKey, body: Body) -> bool:
        return bool(self.keepers(key, body))

    def changed(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        """Tells each view that keeps the object, or kept it (it hears None)."""
        now = self.keepers(key, body)
        for view in now | self.keepers(key, previous):
            view.on_change(key, body if view in now else None)

    def health_moved(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        """Tells each view that keeps the object that only its health moved."""
        for view in self.keepers(key, body):
            view.on_health(key)

    def add(self, view: LiveCache, namespace: str, keys: Iterable[ObjectKey]) -> None:
        with self.lock:
            self.owners.setdefault((view.applyset_id, namespace), set()).add(view)
            for key in keys:
                self.wanting.setdefault(key, set()).add(view)

    def remove_keys(self, view: LiveCache, keys: Iterable[ObjectKey]) -> None:
        with self.lock:
            for key in keys:
                _discard(self.wanting, key, view)

    def remove(self, view: LiveCache, namespace: str, keys: Iterable[ObjectKey]) -> None:
        with self.lock:
            _discard(self.owners, (view.applyset_id, namespace), view)
        self.remove_keys(view, keys)

    def empty(self) -> bool:
        with self.lock:
            return not self.owners and not self.wanting


def _discard(index: dict[Index, set[LiveCache]], key: Index, view: LiveCache) -> None:
    views = index.get(key)
    if views is not None:
        views.discard(view)
        if not views:
            del index[key]


@dataclass(eq=False)
class Joined:
    """One scope of a view: the informer it reads there, and what it keeps of it."""

    informer: Informer
    audience: Audience
    owned: Owned
    wanted: frozenset[ObjectKey]


@dataclass
class Watches:
    """The daemon's informers, shared by its sources; they stop with `stopping`."""

    stopping: threading.Event
    informers: dict[Shared, tuple[Informer, Audience]] = field(default_factory=dict)
    everywhere: dict[tuple[Acting, Resource], bool] = field(default_factory=dict)
    """Whether an identity may list and watch a resource in all namespaces of a cluster."""
    events: WatchEvents = field(default_factory=WatchEvents)
    """What their watch events came to (gitopsd_watch_events_total)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def join(
        self, view: LiveCache, resource: Resource, namespace: str, keys: frozenset[ObjectKey]
    ) -> Joined:
        """Has the informer that watches `resource` where `namespace` lies keep `view`'s
        objects there and `keys`; catches up if it ran before (it skipped them)."""
        watched = self._watched(view.cluster, resource, namespace)
        shared = (acting(view.cluster), resource, watched)
        with self.lock:
            found = self.informers.get(shared)
            informer, audience = found or self._informer(view.cluster, shared)
            audience.add(view, namespace, keys)
        if found is None:
            name = f"informer-{resource.plural}-{shared[2] or 'all'}"
            threading.Thread(target=informer.run, name=name, daemon=True).start()
        else:
            informer.catch_up(namespace)
        return Joined(informer, audience, (view.applyset_id, namespace), keys)

    def want(self, joined: Joined, view: LiveCache, keys: frozenset[ObjectKey]) -> None:
        """Has the informer keep more of git's keys for `view`, catching up on them."""
        added = keys - joined.wanted
        joined.audience.add(view, joined.owned[1], added)
        if added:
            joined.informer.catch_up(joined.owned[1])
        self._unwant(joined, view, joined.wanted - keys)
        joined.wanted = keys

    def _unwant(self, joined: Joined, view: LiveCache, keys: frozenset[ObjectKey]) -> None:
        if keys:
            joined.audience.remove_keys(view, keys)
            joined.informer.forget(keys)

    def leave(self, joined: Joined, view: LiveCache) -> None:
        """Drops what only `view` kept; the last view to leave an informer stops it."""
        namespace = joined.owned[1]
        joined.audience.remove(view, namespace, joined.wanted)
        joined.informer.forget([*joined.wanted, *joined.informer.owned_by(joined.owned)])
        informer = joined.informer
        shared = (acting(view.cluster), informer.resource, informer.namespace)
        with self.lock:
            found = self.informers.get(shared)
            if joined.audience.empty() and found is not None and found[0] is informer:
                informer.retired.set()
                del self.informers[shared]

    def _watched(self, cluster: Cluster, resource: Resource, namespace: str) -> str:
        """The namespace to watch for `namespace`: "" (all) where the identity may."""
        if not resource.namespaced:
            return ""
        asked = (acting(cluster), resource)
        if asked not in self.everywhere:
            self.everywhere[asked] = cluster.may_watch_everywhere(resource)
        return "" if self.everywhere[asked] else namespace

    def _informer(self, cluster: Cluster, shared: Shared) -> tuple[Informer, Audience]:
        audience = Audience()
        resource, namespace = shared[1], shared[2]
        informer = Informer(
            cluster, resource, namespace, audience.keep, audience.changed, self.stopping
        )
        informer.on_health = audience.health_moved
        informer.events = self.events
        self.informers[shared] = (informer, audience)
        return informer, audience


def acting(cluster: Cluster) -> Acting:
    return cluster.name, cluster.identity


@dataclass(eq=False)
class LiveCache:
    """The live objects of one source (owned by its ApplySet `applyset_id`, or wanted by git),
    kept current by the informers it joined."""

    watches: Watches
    cluster: Cluster
    applyset_id: str
    on_change: Callable[[ObjectKey, Body | None], None]
    """Hears of a change of an object it keeps (None: deleted, or no longer kept)."""
    stopping: threading.Event = field(default_factory=threading.Event)
    on_health: Callable[[ObjectKey], None] = lambda key: None
    """Hears of a change that moved only the health of an object it keeps."""
    joined: dict[Scope, Joined] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ensure(self, needed: Mapping[Scope, Resource], wanted: Iterable[ObjectKey]) -> None:
        """Watches each resource in its namespace ("": cluster-wide) and keeps the objects
        of `wanted`; leaves the scopes nothing needs any more."""
        by_scope: dict[Scope, set[ObjectKey]] = {}
        for key in wanted:
            by_scope.setdefault((key.group_kind, key.namespace), set()).add(key)
        with self.lock:
            self.ensure_open()  # a stopped view joins nothing: no one would leave for it
            for scope in self.joined.keys() - needed.keys():
                self.watches.leave(self.joined.pop(scope), self)
            for scope, resource in needed.items():
                self._ensure(scope, resource, frozenset(by_scope.get(scope, ())))

    def _ensure(self, scope: Scope, resource: Resource, keys: frozenset[ObjectKey]) -> None:
        current = self.joined.get(scope)
        if current is not None and current.informer.resource == resource:
            if current.wanted != keys:
                self.watches.want(current, self, keys)
            return
        if current is not None:
            self.watches.leave(current, self)
        self.joined[scope] = self.watches.join(self, resource, scope[1], keys)

    def ensure_open(self) -> None:
        """Raises STOPPED once the cache is stopping: nothing read of it then is whole."""
        if self._stopped():
            raise ClusterError(STOPPED, ClusterReason.FENCED)

    def wait_synced(self, timeout_seconds: float) -> bool:
        """Whether every informer synced within the timeout; raises at once the refusal of
        one the API server forbids to list or watch (it would not sync in time either), and
        STOPPED once the cache is stopping (its informers never will sync)."""
        deadline = time.monotonic() + timeout_seconds
        for informer in self._informers():
            while not informer.synced.wait(min(REFUSAL_CHECK_SECONDS, deadline - time.monotonic())):
                if informer.refusal is not None:
                    raise informer.refusal
                if self._stopped():
                    raise ClusterError(STOPPED, ClusterReason.FENCED)
                if time.monotonic() >= deadline:
                    return False
        return True

    def _stopped(self) -> bool:
        return self.stopping.is_set() or self.watches.stopping.is_set()

    def _informers(self) -> list[Informer]:
        with self.lock:
            return list({id(j.informer): j.informer for j in self.joined.values()}.values())

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self._informers())

    def objects(self) -> dict[ObjectKey, Body]:
        with self.lock:
            joined = list(self.joined.values())
        found: dict[ObjectKey, Body] = {}
        for each in joined:
            found.update(each.informer.owned_by(each.owned))
            found.update(each.informer.held(each.wanted))
        return found

    def held(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Body | None]:
        """The newest body of each of `keys` (None: none held)."""
        found: dict[ObjectKey, Body | None] = {}
        for key in keys:
            joined = self.joined.get((key.group_kind, key.namespace))
            found[key] = joined.informer.get(key) if joined else None
        return found

    def memo_version(self, key: ObjectKey, body: Body) -> str:
        """`body`'s versions for the drift memo, as `OWNED@CONTENT`: what a dry-run could
        find different in it, and the resourceVersion of its last change but of status,
        computed once per watch event. A body older than the newest event has its own."""
        joined = self.joined.get((key.group_kind, key.namespace))
        if joined is None:
            return f"{owned_version(body)}@{body.get('metadata', {}).get('resourceVersion', '')}"
        return joined.informer.memo_version(key, body)

    def stop(self) -> None:
        """Leaves every informer: what only this source kept is dropped."""
        self.stopping.set()
        with self.lock:
            for joined in self.joined.values():
                self.watches.leave(joined, self)
            self.joined.clear()
