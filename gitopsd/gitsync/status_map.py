"""A configured source's status ConfigMap, `gitopsd.source.NAME` in the daemon's
`controlNamespace`: for a source of the configuration file what a GitSync's status,
`spec.suspend` and reconcile-requested-at annotation are for a GitSync. Through it the
CLI reaches an in-cluster daemon by the API server, as Flux's CLI does, and a suspension
outlives a restart and a change of leader.

Kept in the admin's namespace, not beside the source's record: that lies where the
source applies, often a namespace a tenant writes, and a tenant must not suspend or
steer an admin's source. The name cannot be a record's (theirs are `gitopsd-NAME`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitopsd.configfile.clusters import HOME
from gitopsd.gitsync import RECONCILE_REQUESTED_ANNOTATION
from gitopsd.gitsync.spec import MAX_REQUEST
from gitopsd.objects import Body

PREFIX = "gitopsd.source."
SOURCE_LABEL = "gitopsd.io/source"
"""The source a status ConfigMap is of: how the CLI lists them."""
STATUS_KEY = "status"
"""The status, in the words of a GitSync's (JSON): written by the daemon only."""
RECORD_KEY = "record"
"""NAMESPACE/NAME of the source's record, its ApplySet parent (`gitopsd tree`)."""
CLUSTER_KEY = "cluster"
"""The cluster the source syncs into, where its record is: in-cluster or a declared one."""
SUSPEND_KEY = "suspend"
"""'true' while suspended: written by `gitopsd suspend` and `resume`."""
MAX_STATUS_BYTES = 512 * 1024
"""Most bytes of a status read back: a ConfigMap holds 1 MiB, a status is far less."""


@dataclass(frozen=True)
class Where:
    """Where a source's record is: its ApplySet parent, in the cluster it syncs into."""

    parent: str
    """NAMESPACE/NAME; "" before the source was first read."""
    cluster: str = HOME


def map_name(source: str) -> str:
    return PREFIX + source


def status_map(source: str, namespace: str, status: Body, where: Where) -> Body:
    """The ConfigMap the daemon applies, with its fields only (never the suspension)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": map_name(source),
            "namespace": namespace,
            "labels": {SOURCE_LABEL: source, "app.kubernetes.io/managed-by": "gitopsd"},
        },
        "data": {
            STATUS_KEY: json.dumps(status, sort_keys=True),
            RECORD_KEY: where.parent,
            CLUSTER_KEY: where.cluster,
        },
    }


def source_of(body: Body | None) -> str:
    """The source `body` is the status ConfigMap of, or "" when it is none."""
    metadata = (body or {}).get("metadata") or {}
    source = str((metadata.get("labels") or {}).get(SOURCE_LABEL, ""))
    return source if source and metadata.get("name") == map_name(source) else ""


def suspended(body: Body | None) -> bool:
    return _data(body).get(SUSPEND_KEY) == "true"


def requested(body: Body | None) -> str:
    annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(RECONCILE_REQUESTED_ANNOTATION, ""))[:MAX_REQUEST]


def status(body: Body | None) -> dict[str, Any]:
    """The status the daemon wrote; {} before it wrote one (or if it is not JSON)."""
    text = str(_data(body).get(STATUS_KEY, ""))
    if not text or len(text) > MAX_STATUS_BYTES:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def where(body: Body | None) -> Where:
    data = _data(body)
    return Where(str(data.get(RECORD_KEY, "")), str(data.get(CLUSTER_KEY) or HOME))


def suspend_patch(body: Body, suspend: bool) -> list[dict[str, Any]]:
    """A JSON patch of the suspension, under the resourceVersion read."""
    value = "true" if suspend else "false"
    if (body.get("data") or {}) == {}:
        return [_version(body), {"op": "add", "path": "/data", "value": {SUSPEND_KEY: value}}]
    return [_version(body), {"op": "add", "path": f"/data/{SUSPEND_KEY}", "value": value}]


def annotation_patch(body: Body, key: str, value: str) -> list[dict[str, Any]]:
    """A JSON patch that sets annotation `key`, under the resourceVersion read (a GitSync's
    request to reconcile, or a status ConfigMap's)."""
    operation: dict[str, Any] = {"op": "add", "path": "/metadata/annotations"}
    if (body.get("metadata") or {}).get("annotations"):
        operation["path"] += "/" + key.replace("~", "~0").replace("/", "~1")
        operation["value"] = value
    else:
        operation["value"] = {key: value}
    return [_version(body), operation]


def _version(body: Body) -> dict[str, Any]:
    version = body["metadata"]["resourceVersion"]
    return {"op": "test", "path": "/metadata/resourceVersion", "value": version}


def _data(body: Body | None) -> dict[str, Any]:
    data = (body or {}).get("data")
    return data if isinstance(data, dict) else {}
