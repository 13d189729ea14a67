"""A GitSync's life at its ends: the finalizer added while it exists, and, once it is being
deleted, what it applied withdrawn (with delete-policy prune) before the finalizer goes and
the API server deletes it. Only the replica that writes for it does."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsd import gitsync
from gitopsd.cluster import Cluster
from gitopsd.cluster.cache import content
from gitopsd.config import Credentials
from gitopsd.daemon.writers import Writers
from gitopsd.gitsync.spec import GitSync
from gitopsd.objects import Body
from gitopsd.reconcile import Source, withdraw
from gitopsd.resources import NAMESPACES

log = logging.getLogger("gitopsd.gitsync")


@dataclass(frozen=True)
class Lifecycle:
    writers: Writers
    target: Callable[[GitSync, Cluster, Path], Cluster]
    """Where a GitSync's objects are, acting as it does there (`Clusters.of_gitsync`)."""

    def hold(self, body: Body) -> None:
        """Adds the finalizer (by the replica that writes for it only)."""
        cluster = self._cluster(body)
        if not cluster.writable():
            return
        finalizers = body["metadata"].get("finalizers")
        operation: dict[str, Any] = (
            {"op": "add", "path": "/metadata/finalizers/-", "value": gitsync.FINALIZER}
            if finalizers
            else {"op": "add", "path": "/metadata/finalizers", "value": [gitsync.FINALIZER]}
        )
        _patch(cluster, body, [operation])

    def finalize(self, body: Body, wanted: GitSync, home: Path) -> None:
        """With delete-policy prune, what it applied is withdrawn first (its source already
        stopped); then the finalizer goes, and the API server deletes the GitSync."""
        cluster = self._cluster(body)
        if not wanted.finalized or not cluster.writable():
            return
        if wanted.prune_on_delete:
            self._withdraw(cluster, body, wanted, home)
        self.release(body)
        log.info("deleted", extra={"source": wanted.key})

    def release(self, body: Body, warning: str = "") -> None:
        """Removes the finalizer (the API server then deletes the GitSync), if it holds it;
        `warning` says what was left undone."""
        finalizers = body["metadata"].get("finalizers") or []
        cluster = self._cluster(body)
        if gitsync.FINALIZER not in finalizers or not cluster.writable():
            return
        if warning:
            cluster.event(body, "PruneSkipped", warning)
        index = finalizers.index(gitsync.FINALIZER)
        _patch(cluster, body, [{"op": "remove", "path": f"/metadata/finalizers/{index}"}])

    def _cluster(self, body: Body) -> Cluster:
        return self.writers.cluster_for(body["metadata"]["namespace"])

    def _withdraw(self, cluster: Cluster, body: Body, wanted: GitSync, home: Path) -> None:
        """Prunes what it applied, as if git held nothing (nothing is fetched)."""
        namespace = cluster.get(NAMESPACES, "", wanted.namespace) or {}
        if (namespace.get("metadata") or {}).get("deletionTimestamp"):
            message = f"namespace {wanted.namespace} is being deleted: nothing pruned"
            cluster.event(body, "PruneSkipped", message)
            return
        acting = self.target(wanted, cluster, home / "cluster")
        source = wanted.source(Credentials(password_env=None))
        report = withdraw(Source(source.spec, source.settings, home), acting)
        pruned = [o.key for o in report.changes.outcomes]
        cluster.event(
            body,
            "Pruned",
            f"deleted with delete-policy prune: pruned {len(pruned)} objects",
            "Normal",
        )
        if report.refused:
            kept = "; ".join(f"{key} ({reason})" for key, reason in report.refused)
            cluster.event(body, "PruneBlocked", f"kept by the prune guards: {kept}")


def _patch(cluster: Cluster, body: Body, operations: list[dict[str, Any]]) -> None:
    """A JSON patch of the GitSync as seen: a newer version fails the test, and is handled
    when its own watch event arrives."""
    metadata = body["metadata"]
    version = {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": metadata["resourceVersion"],
    }
    cluster.patch(gitsync.RESOURCE, metadata["namespace"], metadata["name"], [version, *operations])


def finalizer_joined(previous: Body | None, body: Body | None) -> bool:
    """Whether the change is the daemon's finalizer joining the GitSync's, and nothing more
    (its spec, labels and annotations are as they were)."""
    if previous is None or body is None:
        return False
    before = previous["metadata"].get("finalizers") or []
    if (body["metadata"].get("finalizers") or []) != [*before, gitsync.FINALIZER]:
        return False
    return content(_without_finalizers(previous)) == content(_without_finalizers(body))


def _without_finalizers(body: Body) -> Body:
    metadata = {k: v for k, v in body["metadata"].items() if k != "finalizers"}
    return {**body, "metadata": metadata}
