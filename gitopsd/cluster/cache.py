"""An informer: a live cache of one resource in one namespace (or all), fed by LIST + WATCH.

It lists once, then watches from the list's resourceVersion with bookmarks. Its
thread never dies: after any failure (a cut or refused connection, an empty stream, a bug)
it reports unsynced and backs off with jitter, then watches again from the last version
it saw; only 410 Gone (history compacted past that version) makes it list again. A
Forbidden answer is kept too, so that a reconcile waiting for the cache fails at once with
the refusal (its resource, namespace and user) instead of at a deadline. It keeps the
objects its `keep` says (for the daemon's sources, see `watches`: those an ApplySet of a
source labels as its own and those git declares), each as its projection (what drift,
attribution, ownership and health read; see `projection`), indexed by their ApplySet, with
its owned version (`managed_fields.owned_version`, computed once per event). A change that
moves the owned version (what a dry-run of gitopsd's apply could find different) reaches
`on_change`, so drift is measured again within about a second of an edit; one that moves
only the object's health (a rollout's progress) reaches `on_health`, which assesses it
again and measures nothing. A controller's status or annotation, or a field another
manager owns, costs nothing more than its event. Kept whole (a controller's own objects),
any change but of status reaches `on_change`. A no-op reconcile reads only memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from gitopsd import health
from gitopsd.backoff import Backoff
from gitopsd.cluster import Cluster, Keep, Resource
from gitopsd.cluster.api import ApiError
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.managed_fields import owned_version
from gitopsd.objects import Body, ObjectKey, key_of, owner_of

log = logging.getLogger("gitopsd.cache")
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 10.0

Change = Callable[[ObjectKey, Body | None, Body | None], None]
"""Called with the object's key, the body held before and the new one (None: none held)."""
Unless = Callable[[ObjectKey, Body | None], bool]
Owned = tuple[str, str]
"""An ApplySet id and a namespace ("" for cluster-scoped objects): whose objects, where."""


class Outcome(StrEnum):
    """What a watch event came to: the `outcome` of gitopsd_watch_events_total."""

    UNKEPT = "unkept"
    """No source keeps the object (another's, in a namespace watched for all): dropped."""
    IGNORED = "ignored"
    """Kept; only what gitopsd does not own moved (status, bookkeeping, others' fields)."""
    HEALTH = "health"
    """Kept; only its health moved: assessed again, no drift measured."""
    OWNED = "owned"
    """What gitopsd owns moved, or it came or went: its drift is checked."""


@dataclass
class WatchEvents:
    """Watch events by resource and outcome, counted by the informers of the daemon's
    sources while a scrape reads them: what a cluster's churn costs, and what it sets off."""

    _events: dict[tuple[str, Outcome], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, resource: Resource, outcome: Outcome) -> None:
        name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        with self._lock:
            self._events[(name, outcome)] = self._events.get((name, outcome), 0) + 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return {(name, str(outcome)): n for (name, outcome), n in self._events.items()}


def content(body: Body | None) -> object:
    """What a change must touch to matter: everything but status and bookkeeping."""
    if body is None:
        return None
    metadata = {
        k: v
        for k, v in (body.get("metadata") or {}).items()
        if k not in ("resourceVersion", "managedFields", "generation")
    }
    return {**{k: v for k, v in body.items() if k != "status"}, "metadata": metadata}


def resource_version(body: Body) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


@dataclass
class Informer:
    cluster: Cluster
    resource: Resource
    namespace: str
    keep: Keep
    on_change: Change
    stopping: threading.Event
    on_health: Change | None = None
    """Hears of a change that moved only the object's health (a rollout's progress), which
    needs no drift measured; None: `on_change` hears it too."""
    events: WatchEvents | None = None
    """Counts what each watch event came to (None: uncounted)."""
    whole: bool = False
    """Keep bodies whole (status and generation too), not projected: for a controller's own
    objects, not for the objects drift is measured on."""
    store: dict[ObjectKey, Body] = field(default_factory=dict)
    versions: dict[ObjectKey, tuple[str, str, str]] = field(default_factory=dict)
    """Each projected object's resourceVersion, its owned version (`owned_version`) and the
    resourceVersion of its last change of anything but status."""
    owned: dict[Owned, set[ObjectKey]] = field(default_factory=dict)
    """The keys held, by the ApplySet that labels them and their namespace."""
    catching_up: list[set[ObjectKey]] = field(default_factory=list)
    """For each catch-up or list in progress, the keys recorded since it began."""
    synced: threading.Event = field(default_factory=threading.Event)
    retired: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    backoff: Backoff = field(
        default_factory=lambda: Backoff(FIRST_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS)
    )
    """Counts the failures since a watch last delivered an event."""
    version: str = ""
    """The resourceVersion seen last, from which the next watch starts ("": list first)."""
    refusal: ClusterError | None = None
    """Why the API server refuses this watch (Forbidden), until a list or watch succeeds:
    waiting for it to sync would only wait out a deadline."""

    def run(self) -> None:
        while not self._done():
            try:
                self.version = self.version or self._relist()
                delivered = self._watch()
            except ClusterError as error:
                self.synced.clear()  # events may be missed until the watch is open again
                if isinstance(error, ApiError) and error.status == 410:
                    self.version = ""  # history compacted past our version: list again
                self.refusal = self._refused(error)
                self._back_off(error)
            except Exception as error:  # a bug must not end drift detection silently
                self.synced.clear()
                log.exception("watch of %s failed unexpectedly", self.resource.plural)
                self._back_off(error)
            else:
                if not delivered:  # a server or proxy that closes at once: no busy loop
                    self._back_off("the watch ended without an event")

    def _done(self) -> bool:
        return self.stopping.is_set() or self.retired.is_set()

    def _refused(self, error: ClusterError) -> ClusterError | None:
        if error.reason != ClusterReason.FORBIDDEN:
            return None
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        return ClusterError(f"watch of {self.resource.plural} in {where}: {error}", error.reason)

    def _relist(self) -> str:
        """Lists, and holds what the list holds. What to keep is asked as late as can be: an
        object someone began to keep meanwhile (and caught up on) stays. Only what was kept
        when its page was read is projected: most objects of all namespaces are others'."""
        with self._recorded_meanwhile() as seen:
            listing = self.cluster.list_with_version(
                self.resource, self.namespace, projected=not self.whole, keep=self.keep
            )
            listed = {key_of(item): item for item in listing.items}
            with self.lock:
                held = set(self.store)
            for key in held - listing.keys:
                self._record(key, None)
            for key, body in listed.items():
                if self.keep(key, body):
                    self._record(key, body)
                elif key in held:
                    self._record(key, None)
            for key in (held & listing.keys) - listed.keys():  # kept by none when listed
                self._record(key, None, lambda k, _: k in seen)
        self.synced.set()
        self.refusal = None
        return listing.version

    def _watch(self) -> bool:
        """Follows one watch from its opening (from then on the cache is synced) to its end,
        keeping the version to resume from; returns whether any event came."""
        events = self.cluster.watch(self.resource, self.namespace, self.version)
        self.synced.set()
        self.refusal = None
        delivered = False
        for event in events:
            if self.retired.is_set():
                break
            delivered = True
            self.backoff.reset()
            kind, body = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise ApiError(int(body.get("code", 500)), str(body.get("message", "watch error")))
            self.version = resource_version(body) or self.version
            if kind == "BOOKMARK":
                continue
            body = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, **body}
            key = key_of(body)
            kept = kind != "DELETED" and self.keep(key, body)
            outcome = self._record(key, self._stored(body) if kept else None)
            if self.events is not None:  # not kept, and none held: no one's
                unkept = not kept and outcome == Outcome.IGNORED
                self.events.count(self.resource, Outcome.UNKEPT if unkept else outcome)
        return delivered

    def _stored(self, body: Body) -> Body:
        return body if self.whole else self.cluster.projection.of(body)

    def _record(self, key: ObjectKey, body: Body | None, unless: Unless | None = None) -> Outcome:
        """Stores the newest body (None: gone) with its owned version, and reports a change
        that moved it, or the health; says which. `unless`, asked under the lock with the
        body held, vetoes it."""
        with self.lock:
            previous = self.store.get(key)
            if unless is not None and unless(key, previous):
                return Outcome.IGNORED
            for seen in self.catching_up:
                seen.add(key)
            versions = self._versions(key, previous, body)
            changed = self._moved(key, previous, body, versions)
            self._index(key, previous, body)
            if body is None:
                self.store.pop(key, None)
                self.versions.pop(key, None)
            else:
                self.store[key] = body
                if versions is not None:
                    self.versions[key] = (resource_version(body), *versions)
        if changed:
            self.on_change(key, previous, body)
            return Outcome.OWNED
        if self._health_changed(previous, body):
            (self.on_health or self.on_change)(key, previous, body)
            return Outcome.HEALTH
        return Outcome.IGNORED

    def _versions(
        self, key: ObjectKey, previous: Body | None, body: Body | None
    ) -> tuple[str, str] | None:
        """The owned version of `body` and the resourceVersion of its last change but of
        status (None: no body, or kept whole); those held when only its status moved (most
        of a rollout's events)."""
        if body is None or self.whole:
            return None
        held = self.versions.get(key)
        if held is not None and content(previous) == content(body):
            return held[1], held[2]
        return owned_version(body), resource_version(body)

    def _moved(
        self,
        key: ObjectKey,
        previous: Body | None,
        body: Body | None,
        versions: tuple[str, str] | None,
    ) -> bool:
        """Whether the change matters beyond its health: its owned version moved (it came,
        went or changed so), or, kept whole, anything but its status did."""
        if self.whole:
            return content(previous) != content(body)
        if previous is None or body is None:
            return previous is not body
        before = self.versions.get(key)
        return before is None or versions is None or before[1] != versions[0]

    def _index(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        before, now = owner_of(previous) or "", owner_of(body) or ""
        if previous is not None and (body is None or before != now):
            keys = self.owned.get((before, key.namespace), set())
            keys.discard(key)
            if not keys:
                self.owned.pop((before, key.namespace), None)
        if body is not None:
            self.owned.setdefault((now, key.namespace), set()).add(key)

    def catch_up(self, namespace: str) -> None:
        """Lists `namespace` ("": all) again and holds the objects now kept that it did not
        hold: someone began to keep them after they were listed. A consistent list is at
        least as new as any event the watch delivered before it was asked; an object the
        watch recorded since is left as the watch has it."""
        with self._recorded_meanwhile() as seen:
            listing = self.cluster.list_with_version(
                self.resource, namespace, projected=not self.whole, keep=self.keep
            )
            for item in listing.items:  # what the watch recorded is as new, or newer
                self._record(key_of(item), item, lambda k, held: held is not None or k in seen)

    @contextmanager
    def _recorded_meanwhile(self) -> Iterator[set[ObjectKey]]:
        """The keys recorded from now until the block ends (by the watch, catch-ups)."""
        seen: set[ObjectKey] = set()
        with self.lock:
            self.catching_up.append(seen)
        try:
            yield seen
        finally:
            with self.lock:  # by identity: two catch-ups may have seen the same keys
                self.catching_up = [other for other in self.catching_up if other is not seen]

    def owned_by(self, owned: Owned) -> dict[ObjectKey, Body]:
        """The objects held that an ApplySet labels as its own, in one namespace."""
        with self.lock:
            return {key: self.store[key] for key in self.owned.get(owned, ())}

    def held(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Body]:
        with self.lock:
            return {key: self.store[key] for key in keys if key in self.store}

    def _health_changed(self, previous: Body | None, body: Body | None) -> bool:
        """A status change that moves the object's health (a rollout's progress). A
        controller's own objects (kept whole) are not assessed: their status is its own."""
        if self.whole:
            return False
        before, now = health.assess(previous), health.assess(body)
        return (before.status, before.reason) != (now.status, now.reason)

    def get(self, key: ObjectKey) -> Body | None:
        with self.lock:
            return self.store.get(key)

    def memo_version(self, key: ObjectKey, body: Body) -> str:
        """`body`'s owned version and the resourceVersion of its last change but of status,
        as `OWNED@CONTENT` (see `DriftMemo`); as held if it is the body held, else its own."""
        with self.lock:
            held = self.versions.get(key)
        if held is not None and held[0] == resource_version(body):
            return f"{held[1]}@{held[2]}"
        return f"{owned_version(body)}@{resource_version(body)}"

    def forget(self, keys: Iterable[ObjectKey]) -> None:
        """Drops those of `keys` no longer kept (they left git and are no one's)."""
        for key in keys:
            self._record(key, None, lambda k, held: held is None or self.keep(k, held))

    def _back_off(self, cause: object) -> None:
        delay = self.backoff.failed()
        plural = self.resource.plural
        log.warning("watch of %s failed, retrying in %.1f s: %s", plural, delay, cause)
        self.stopping.wait(delay)
