"""The configuration's sources' status ConfigMaps (`gitopsd.gitsync.status_map`), as the
daemon keeps them. The replica that writes for a source writes its status when it changed
(an idle source writes nothing); every replica watches them, and so hears a suspension and
a request to reconcile now, as the controller hears a GitSync's spec and annotation. What
is read from them survives a restart and a change of leader."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from gitopsd.cluster import Cluster
from gitopsd.cluster.cache import Informer
from gitopsd.errors import ClusterError
from gitopsd.gitsync import status_map
from gitopsd.gitsync.status import Document, SourceReport, status_of
from gitopsd.objects import Body, ObjectKey
from gitopsd.resources import CONFIG_MAPS

log = logging.getLogger("gitopsd.daemon")


@dataclass
class StatusMaps:
    cluster: Cluster
    """Fenced: only the replica that writes for the configuration's sources writes."""
    namespace: str
    stopping: threading.Event
    on_suspend: Callable[[str, bool], None]
    """Hears that a source was suspended (True) or resumed (False)."""
    on_request: Callable[[str, str], None]
    """Hears a new request to reconcile a source now, with its token."""
    written: dict[str, Document] = field(default_factory=dict)
    """The status written last per source (the watch may not have brought it back yet)."""
    failing: set[str] = field(default_factory=set)
    """The sources whose status could not be written, logged once until it is."""

    def __post_init__(self) -> None:
        self.informer = Informer(
            cluster=self.cluster,
            resource=CONFIG_MAPS,
            namespace=self.namespace,
            keep=lambda key, body: bool(status_map.source_of(body)),
            on_change=self._changed,
            stopping=self.stopping,
            whole=True,
        )

    def start(self) -> None:
        name = f"status-maps-{self.namespace}"
        threading.Thread(target=self.informer.run, name=name, daemon=True).start()

    def wait_synced(self, timeout_seconds: float) -> bool:
        return self.informer.synced.wait(timeout_seconds)

    def status(self, source: str) -> Document:
        """The status kept for `source` ({} before one was written)."""
        return status_map.status(self._map(source))

    def suspended(self, source: str) -> bool:
        return status_map.suspended(self._map(source))

    def publish(
        self, source: str, report: SourceReport, where: status_map.Where, suspended: bool
    ) -> None:
        """Writes the status `report` makes, and where its record is, if either changed and
        this replica writes."""
        if not self.cluster.writable():
            return
        live = self._map(source)
        previous = self.written.get(source) or status_map.status(live) or None
        status = status_of(0, report, previous, suspended, named=True)
        if status == previous and live is not None and status_map.where(live) == where:
            return
        body = status_map.status_map(source, self.namespace, status, where)
        try:
            self.cluster.apply(CONFIG_MAPS, body, dry_run=False, force=True)
        except ClusterError as error:  # the sync went on: its status is written at its next
            if source not in self.failing:
                log.error("cannot write its status: %s", error, extra={"source": source})
            self.failing.add(source)
            return
        self.failing.discard(source)
        self.written[source] = status

    def suspend(self, source: str, suspended: bool) -> None:
        """Keeps the suspension in the source's status ConfigMap (created if it has none
        yet), where every replica, and this one after a restart, reads it."""

        def read() -> Body:
            live = self.cluster.get(CONFIG_MAPS, self.namespace, status_map.map_name(source))
            if live is not None:
                return live
            empty = status_map.status_map(source, self.namespace, {}, status_map.Where(""))
            return self.cluster.apply(CONFIG_MAPS, empty, dry_run=False, force=True)

        patch = partial(status_map.suspend_patch, suspend=suspended)
        self.cluster.patch_as_read(CONFIG_MAPS, read, patch)

    def forget_all(self) -> None:
        """A new leader writes every status afresh."""
        self.written.clear()

    def _map(self, source: str) -> Body | None:
        key = ObjectKey("", "ConfigMap", self.namespace, status_map.map_name(source))
        return self.informer.get(key)

    def _changed(self, key: ObjectKey, previous: Body | None, body: Body | None) -> None:
        source = status_map.source_of(body or previous)
        if not source:
            return
        if status_map.suspended(previous) != status_map.suspended(body):
            suspended = status_map.suspended(body)
            log.info("%s", "suspended" if suspended else "resumed", extra={"source": source})
            self.on_suspend(source, suspended)
        token = status_map.requested(body)
        handled = status_map.status(body).get("lastHandledReconcileAt", "")
        if token and token != status_map.requested(previous) and token != handled:
            self.on_request(source, token)
