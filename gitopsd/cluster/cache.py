"""A live cache fed by LIST + WATCH, one informer per group/kind and namespace.

Each informer lists once, then watches from the list's resourceVersion with bookmarks. Its
thread never dies: after any failure (a cut or refused connection, an empty stream, a bug)
it reports unsynced and backs off with jitter, then watches again from the last version
it saw; only 410 Gone (history compacted past that version) makes it list again. A
Forbidden answer is kept too, so that a reconcile waiting for the cache fails at once with
the refusal (its resource, namespace and user) instead of at a deadline. It keeps the
objects a source cares about: those labelled as its own (for prune) and those git declares
(to see them before they are ours, and conflicts), each as its projection (what drift,
attribution, ownership and health read; see `projection`). A change that touches more
than status, or changes the object's health, reaches `on_change`, so drift and health are
evaluated again within about a second of an edit or a rollout's progress; a no-op
reconcile reads only memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gitopsd import health
from gitopsd.backoff import Backoff
from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.api import ApiError
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import APPLYSET_PART_OF_LABEL, Body, GroupKind, ObjectKey, key_of

log = logging.getLogger("gitopsd.cache")
FIRST_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 10.0
REFUSAL_CHECK_SECONDS = 0.1
STOPPED = "the watch cache stopped: this source is stopping"
"""What a read gets from a cache that stops meanwhile (the process shutting down, the source
retired), as a fenced ClusterError: the reconcile ends there, as at its next write."""

OnChange = Callable[[ObjectKey, Body | None], None]
"""Called with the object's key and its new body (None when deleted or no longer kept)."""
Keep = Callable[[ObjectKey, Body], bool]
Scope = tuple[GroupKind, str]
"""A group/kind and a namespace ("" for cluster-scoped kinds): what one informer watches."""


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


def _version(body: Body) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


@dataclass
class Informer:
    cluster: Cluster
    resource: Resource
    namespace: str
    keep: Keep
    on_change: OnChange
    stopping: threading.Event
    whole: bool = False
    """Keep bodies whole (status and generation too), not projected: for a controller's own
    objects, not for the objects drift is measured on."""
    store: dict[ObjectKey, Body] = field(default_factory=dict)
    content_versions: dict[ObjectKey, str] = field(default_factory=dict)
    """The resourceVersion of each object's last change of content (not of status)."""
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
        items, version = self.cluster.list_with_version(
            self.resource, self.namespace, projected=not self.whole
        )
        listed = {key_of(item): item for item in items}
        fresh = {key: item for key, item in listed.items() if self.keep(key, item)}
        with self.lock:
            previous = self.store
        for key in previous.keys() - fresh.keys():
            self._record(key, None)
        for key, body in fresh.items():
            self._record(key, body)
        self.synced.set()
        self.refusal = None
        return version

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
            self.version = _version(body) or self.version
            if kind == "BOOKMARK":
                continue
            body = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, **body}
            key = key_of(body)
            kept = kind != "DELETED" and self.keep(key, body)
            kept_body = body if self.whole else self.cluster.projection.of(body)
            self._record(key, kept_body if kept else None)
        return delivered

    def _record(self, key: ObjectKey, body: Body | None) -> None:
        """Stores the newest body (None: gone); a change of content moves its version and
        is reported."""
        with self.lock:
            previous = self.store.get(key)
            changed = content(previous) != content(body)
            if body is None:
                self.store.pop(key, None)
                self.content_versions.pop(key, None)
            else:
                self.store[key] = body
                if changed:
                    self.content_versions[key] = _version(body)
        if changed or self._health_changed(previous, body):
            self.on_change(key, body)

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

    def content_version(self, key: ObjectKey, body: Body) -> str | None:
        """The content version of `body` if it is the newest body held; None for an older
        one, which must not borrow the version of content it does not have."""
        with self.lock:
            newest = self.store.get(key)
            if newest is None or _version(newest) != _version(body):
                return None
            return self.content_versions.get(key)

    def purge(self) -> None:
        """Drops objects no longer kept (they left git and are not ours)."""
        with self.lock:
            dropped = [key for key, body in self.store.items() if not self.keep(key, body)]
        for key in dropped:
            self._record(key, None)

    def _back_off(self, cause: object) -> None:
        delay = self.backoff.failed()
        plural = self.resource.plural
        log.warning("watch of %s failed, retrying in %.1f s: %s", plural, delay, cause)
        self.stopping.wait(delay)


@dataclass
class LiveCache:
    """The live objects of one source (owned by its ApplySet `applyset_id`, or wanted by git),
    kept current by informers."""

    cluster: Cluster
    applyset_id: str
    on_change: OnChange
    stopping: threading.Event = field(default_factory=threading.Event)
    wanted: frozenset[ObjectKey] = frozenset()
    informers: dict[Scope, Informer] = field(default_factory=dict)

    def ensure(self, needed: Mapping[Scope, Resource], wanted: Iterable[ObjectKey]) -> None:
        """Watches each resource in its namespace ("": cluster-wide) and keeps the objects
        of `wanted`. An informer that may have dropped a newly wanted object lists again; one
        whose scope nothing needs any more stops."""
        wanted = frozenset(wanted)
        grown = {(key.group_kind, key.namespace) for key in wanted - self.wanted}
        shrunk = bool(self.wanted - wanted)
        self.wanted = wanted
        for scope in self.informers.keys() - needed.keys():
            self.informers.pop(scope).retired.set()
        for scope, resource in needed.items():
            current = self.informers.get(scope)
            if current is None or current.resource != resource or scope in grown:
                self._start(resource, scope[1], current)
            elif shrunk:
                current.purge()

    def _keep(self, key: ObjectKey, body: Body) -> bool:
        labels = (body.get("metadata") or {}).get("labels") or {}
        return labels.get(APPLYSET_PART_OF_LABEL) == self.applyset_id or key in self.wanted

    def _start(self, resource: Resource, namespace: str, previous: Informer | None) -> None:
        """Starts an informer; one it replaces hands over what it knew, so that the new
        list reports only real changes."""
        informer = Informer(
            self.cluster, resource, namespace, self._keep, self.on_change, self.stopping
        )
        if previous is not None:
            previous.retired.set()
            with previous.lock:
                informer.store = dict(previous.store)
                informer.content_versions = dict(previous.content_versions)
        self.informers[(GroupKind(resource.group, resource.kind), namespace)] = informer
        name = f"informer-{resource.plural}-{namespace or 'cluster'}"
        threading.Thread(target=informer.run, name=name, daemon=True).start()

    def wait_synced(self, timeout_seconds: float) -> bool:
        """Whether every informer synced within the timeout; raises at once the refusal of
        one the API server forbids to list or watch (it would not sync in time either), and
        STOPPED once the cache is stopping (its informers never will sync)."""
        deadline = time.monotonic() + timeout_seconds
        for informer in list(self.informers.values()):
            while not informer.synced.wait(min(REFUSAL_CHECK_SECONDS, deadline - time.monotonic())):
                if informer.refusal is not None:
                    raise informer.refusal
                if self.stopping.is_set():
                    raise ClusterError(STOPPED, ClusterReason.FENCED)
                if time.monotonic() >= deadline:
                    return False
        return True

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in list(self.informers.values()))

    def objects(self) -> dict[ObjectKey, Body]:
        found: dict[ObjectKey, Body] = {}
        for informer in list(self.informers.values()):
            with informer.lock:
                found.update(informer.store)
        return found

    def content_version(self, key: ObjectKey, body: Body) -> str:
        """A version of `body` that moves when its content does, not when only its status
        does (falls back to the resourceVersion). A drift check that read `body` just before
        a newer event arrived is remembered under `body`'s version, so the event's content is
        checked too."""
        informer = self.informers.get((key.group_kind, key.namespace))
        known = informer.content_version(key, body) if informer else None
        return known or _version(body)

    def stop(self) -> None:
        self.stopping.set()
