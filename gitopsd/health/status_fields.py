"""What of a status the rules read: `essentials` cuts a status to it, so that the watch
cache keeps that much of each object's status and no more (`gitopsd.cluster.projection`)."""

from __future__ import annotations

from typing import Any

from gitopsd.objects import Body

STATUS_FIELDS = frozenset(
    {
        "observedGeneration",
        "conditions",
        "phase",
        "reason",
        "message",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "currentRevision",
        "updateRevision",
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "updatedNumberScheduled",
        "numberReady",
        "numberAvailable",
        "active",
        "succeeded",
        "failed",
        "loadBalancer",
    }
)
"""Every top-level field of `.status` some rule reads."""

EMPTY: dict[str, Any] = {"loadBalancer": {}, "conditions": []}
"""Status fields whose empty value assesses as their absence does: a ClusterIP Service's
`loadBalancer: {}`, a status with no conditions yet."""

_CONDITION_FIELDS = frozenset({"type", "status", "reason", "message"})


def essentials(body: Body) -> Any:
    """`body`'s status cut to what `assess` reads, to keep instead of the whole status: the
    body with this status in place of its own assesses the same. None when there is no
    status. A field that holds its empty value (`EMPTY`) is left out. Values of the wrong
    type, a status that is not an object included, are kept as they are, so they still
    assess Unknown."""
    status = body.get("status")
    if not isinstance(status, dict):
        return status
    kept = {
        key: value
        for key, value in status.items()
        if key in STATUS_FIELDS and not (key in EMPTY and value == EMPTY[key])
    }
    if isinstance(kept.get("conditions"), list):
        kept["conditions"] = [_essential_condition(item) for item in kept["conditions"]]
    return kept


def _essential_condition(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    return {key: value for key, value in item.items() if key in _CONDITION_FIELDS}
