"""A GitSync's status, written through the status subresource only when it changed (and
only by the replica that writes for it), with the Events a change of status is worth."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitopsd import gitsync
from gitopsd.daemon.writers import Writers
from gitopsd.errors import GitopsdError
from gitopsd.gitsync.spec import requested_of
from gitopsd.gitsync.status import Document, Failure, SourceReport, events, failed_status, status_of
from gitopsd.objects import Body, ObjectKey


@dataclass
class StatusPublisher:
    writers: Writers
    written: dict[ObjectKey, Document] = field(default_factory=dict)
    """The status written last per GitSync (the watch may not have brought it back yet)."""

    def report(self, key: ObjectKey, body: Body, report: SourceReport, suspended: bool) -> None:
        """The status its source's report makes."""
        self._publish(key, body, lambda gen, was: status_of(gen, report, was, suspended))

    def failure(self, key: ObjectKey, body: Body, error: GitopsdError) -> None:
        """The status of a GitSync whose source cannot run."""
        failure, handled = Failure.of(error), requested_of(body)
        self._publish(key, body, lambda gen, was: failed_status(gen, failure, was, handled))

    def forget(self, key: ObjectKey) -> None:
        self.written.pop(key, None)

    def forget_all(self) -> None:
        """A new leader (or a replica whose share changed) writes every status afresh."""
        self.written.clear()

    def _publish(
        self, key: ObjectKey, body: Body, status_for: Callable[[int, Document | None], Document]
    ) -> None:
        """Writes the status `status_for(generation, previous status)` if it changed (by the
        replica that writes for it only), with the Events the change is worth."""
        cluster = self.writers.cluster_for(key.namespace)
        if not cluster.writable():
            return
        live = body.get("status") or None
        previous = self.written.get(key, live)
        status = status_for(int(body["metadata"].get("generation") or 0), previous)
        if status == live:
            self.written[key] = status
            return
        cluster.apply_status(gitsync.RESOURCE, key.namespace, key.name, status)
        self.written[key] = status
        for event in events(previous, status):
            cluster.event(body, event.reason, event.message, event.type)
