"""The GitSyncs (or GitSyncSets) as the daemon sees them: an informer per served namespace
(or one for all), kept whole (status and generation too), whose changes are told."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gitopsd import gitsync
from gitopsd.cluster import Cluster
from gitopsd.cluster.cache import Change, Informer
from gitopsd.names import DNS1123_SUBDOMAIN, namespace_problem
from gitopsd.objects import Body, ObjectKey, Resource


@dataclass
class GitSyncs:
    cluster: Cluster
    namespaces: tuple[str, ...]
    """Those served; none: all."""
    on_change: Change
    stopping: threading.Event
    resource: Resource = gitsync.RESOURCE

    def __post_init__(self) -> None:
        self.informers = [
            Informer(
                cluster=self.cluster,
                resource=self.resource,
                namespace=namespace,
                keep=_everything,
                on_change=self.on_change,
                stopping=self.stopping,
                whole=True,
            )
            for namespace in self.namespaces or ("",)
        ]

    def start(self) -> None:
        for informer in self.informers:
            where = informer.namespace or "all-namespaces"
            name = f"{self.resource.plural}-{where}"
            threading.Thread(target=informer.run, name=name, daemon=True).start()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def get(self, key: ObjectKey) -> Body | None:
        for informer in self.informers:
            found = informer.get(key)
            if found is not None:
                return found
        return None

    def bodies(self) -> dict[ObjectKey, Body]:
        """Every GitSync seen, by key (a copy)."""
        found: dict[ObjectKey, Body] = {}
        for informer in self.informers:
            with informer.lock:
                found.update(informer.store)
        return found


def webhook_key(path: str) -> ObjectKey | None:
    """The GitSync a webhook path `gitsyncs/NAMESPACE/NAME` names, if it can name one."""
    prefix, _, rest = path.partition("/")
    namespace, _, name = rest.partition("/")
    if prefix != "gitsyncs" or namespace_problem(namespace) or DNS1123_SUBDOMAIN.problem(name):
        return None
    return ObjectKey(gitsync.GROUP, gitsync.KIND, namespace, name)


def _everything(key: ObjectKey, body: Body) -> bool:
    return True
