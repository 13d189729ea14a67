"""Workloads: the counts their controllers write, compared with what the spec asks for.

Deployment, StatefulSet, DaemonSet and ReplicaSet.
"""

from __future__ import annotations

from gitopsd.health.fields import (
    Condition,
    bool_,
    conditions_of,
    get,
    int_,
    must_be_true,
    str_,
    true_condition,
)
from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


def _unobserved(body: Body) -> Health | None:
    """InProgress until the controller has written status: it always sets observedGeneration.
    (kstatus asks this of DaemonSets alone; the API server serves the others an empty status
    until their controller gets to them, which would look like zero replicas done.)"""
    if get(body, "status.observedGeneration") is None:
        return Health(Status.IN_PROGRESS, "NoStatus", "the controller has not reported yet")
    return None


def _shortfall(body: Body, wanted: int, *counts: tuple[str, str]) -> Health | None:
    """InProgress for the first of `counts` (label, status field) below `wanted`."""
    for label, name in counts:
        have = int_(body, f"status.{name}", 0)
        if have < wanted:
            return Health(Status.IN_PROGRESS, "Rollout", f"{label} {have}/{wanted}")
    return None


def _surplus(body: Body, wanted: int, label: str) -> Health | None:
    existing = int_(body, "status.replicas", 0)
    if existing <= wanted:
        return None
    message = f"{label} pending termination: {existing} exist, {wanted} wanted"
    return Health(Status.IN_PROGRESS, "Rollout", message)


def deployment(body: Body) -> Health:
    conditions = conditions_of(body)
    progressing = conditions.get("Progressing")
    if progressing is not None and progressing.reason == "ProgressDeadlineExceeded":
        return progressing.decides(Status.FAILED)
    # Paused on purpose (Argo CD: Suspended): waiting for it would wait until someone resumes.
    if bool_(body, "spec.paused"):
        return Health(Status.CURRENT, "Paused", "spec.paused holds the rollout")
    return _unobserved(body) or _deployment_rollout(body) or _deployment_available(conditions)


def _deployment_rollout(body: Body) -> Health | None:
    wanted = int_(body, "spec.replicas", 1)
    return _shortfall(
        body,
        wanted,
        ("updated replicas", "updatedReplicas"),
        ("ready replicas", "readyReplicas"),
        ("available replicas", "availableReplicas"),  # ready for minReadySeconds
    ) or _surplus(body, wanted, "old replicas")


def _deployment_available(conditions: dict[str, Condition]) -> Health:
    if not conditions:
        return Health(Status.CURRENT)
    return must_be_true(conditions, "Available")


def statefulset(body: Body) -> Health:
    return _unobserved(body) or _statefulset_rollout(body) or Health(Status.CURRENT)


def _statefulset_rollout(body: Body) -> Health | None:
    wanted = int_(body, "spec.replicas", 1)
    not_ready = _shortfall(body, wanted, ("ready replicas", "readyReplicas"))
    # OnDelete replaces a Pod only when someone deletes it: there is no rollout to wait for.
    if str_(body, "spec.updateStrategy.type", "RollingUpdate") == "OnDelete":
        return not_ready
    # Ordinals below the partition keep the old revision on purpose.
    partition = int_(body, "spec.updateStrategy.rollingUpdate.partition", 0)
    to_update = max(wanted - partition, 0)
    return (
        not_ready
        or _shortfall(body, to_update, ("updated replicas", "updatedReplicas"))
        or _surplus(body, wanted, "replicas")
        or (None if partition else _revision_pending(body))
    )


def _revision_pending(body: Body) -> Health | None:
    """The controller names the update revision current once every Pod runs it."""
    current = str_(body, "status.currentRevision")
    update = str_(body, "status.updateRevision")
    if current == update:
        return None
    return Health(Status.IN_PROGRESS, "Rollout", f"revision {update} replacing {current}")


def daemonset(body: Body) -> Health:
    return _unobserved(body) or _daemonset_rollout(body) or Health(Status.CURRENT)


def _daemonset_rollout(body: Body) -> Health | None:
    return _shortfall(
        body,
        int_(body, "status.desiredNumberScheduled", 0),
        ("scheduled pods", "currentNumberScheduled"),
        ("updated pods", "updatedNumberScheduled"),
        ("ready pods", "numberReady"),
        ("available pods", "numberAvailable"),
    )


def replicaset(body: Body) -> Health:
    # InProgress, not Failed, as in kstatus: the controller keeps retrying, and a failure
    # such as an exceeded quota clears once the quota allows.
    if failure := true_condition(conditions_of(body), "ReplicaFailure"):
        return failure.decides(Status.IN_PROGRESS)
    return _unobserved(body) or _replicaset_replicas(body) or Health(Status.CURRENT)


def _replicaset_replicas(body: Body) -> Health | None:
    wanted = int_(body, "spec.replicas", 1)
    return _shortfall(
        body,
        wanted,
        ("ready replicas", "readyReplicas"),
        ("available replicas", "availableReplicas"),
    ) or _surplus(body, wanted, "replicas")
