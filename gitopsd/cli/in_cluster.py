"""A daemon's configured sources reached through the API server (`--in-cluster`), with no
port-forward: their status ConfigMaps in the daemon's controlNamespace hold what `gitopsd
get` shows, take a suspension, and take a request to reconcile now in the annotation the
daemon answers in the status (as a GitSync's)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from gitopsd.cluster import Cluster
from gitopsd.errors import ConfigError
from gitopsd.gitsync import RECONCILE_REQUESTED_ANNOTATION, status_map
from gitopsd.gitsync.status import Document, summary
from gitopsd.objects import Body
from gitopsd.resources import CONFIG_MAPS

CONTROL_NAMESPACE = "gitopsd-system"
"""Where config/manager's daemon keeps them (its controlNamespace)."""


def lines(cluster: Cluster, namespace: str) -> list[Document]:
    """A `gitopsd get` line per source whose status ConfigMap is in `namespace`."""
    return [_line(body) for body in _status_maps(cluster, namespace)]


def line(cluster: Cluster, namespace: str, name: str) -> Document:
    return _line(status_map_of(cluster, namespace, name))


def status_map_of(cluster: Cluster, namespace: str, name: str) -> Body:
    """Source `name`'s status ConfigMap; an unknown name is refused with those there are."""
    found = cluster.get(CONFIG_MAPS, namespace, status_map.map_name(name))
    if found is not None and status_map.source_of(found) == name:
        return found
    names = sorted(status_map.source_of(body) for body in _status_maps(cluster, namespace))
    there = f"those there: {', '.join(names)}" if names else "there is none"
    raise ConfigError(
        f"no source {name} has a status in namespace {namespace} (the daemon's "
        f"controlNamespace); {there}"
    )


def request(cluster: Cluster, namespace: str, name: str, token: str) -> None:
    """Asks for a reconcile of source `name` now, unless it is suspended."""

    def requested(body: Body) -> list[dict[str, Any]]:
        if status_map.suspended(body):
            raise ConfigError(f"source {name} is suspended: gitopsd resume {name} --in-cluster")
        return status_map.annotation_patch(body, RECONCILE_REQUESTED_ANNOTATION, token)

    _patch(cluster, namespace, name, requested)


def suspend(cluster: Cluster, namespace: str, name: str, suspended: bool) -> None:
    _patch(cluster, namespace, name, lambda body: status_map.suspend_patch(body, suspended))


def _patch(
    cluster: Cluster, namespace: str, name: str, patch: Callable[[Body], list[dict[str, Any]]]
) -> None:
    """Writes `patch` of the status ConfigMap as read (read again when the daemon wrote its
    status meanwhile)."""
    cluster.patch_as_read(CONFIG_MAPS, partial(status_map_of, cluster, namespace, name), patch)


def _status_maps(cluster: Cluster, namespace: str) -> list[Body]:
    selector = status_map.SOURCE_LABEL
    found = cluster.list_objects(CONFIG_MAPS, namespace, selector=selector)
    return [body for body in found if status_map.source_of(body)]


def _line(body: Body) -> Document:
    name = status_map.source_of(body)
    line = summary(name, status_map.status(body), status_map.suspended(body))
    return line | {"cluster": status_map.where(body).cluster}
