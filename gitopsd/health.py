"""Health of one live object, in kstatus's vocabulary: is it what its spec asks for yet?

The rules follow kstatus (sigs.k8s.io/cli-utils pkg/kstatus/status), which Flux and
`kubectl wait` follow too; where they part from it, a comment says why. The vocabulary, and
the word Argo CD uses for each:

    Current      Healthy       the object is what its spec asks for
    InProgress   Progressing   a controller is still working on it; it may get there
    Failed       Degraded      it will not get there without a change
    Terminating  Progressing   it is being deleted
    NotFound     Missing       it does not exist
    Unknown      Unknown       its status is malformed: a field holds a value of the wrong type

Argo CD's Suspended is Current here, with reason "Suspended" (or "Paused" for a Deployment).

The rules, first match wins: a deletion requested is Terminating; a status written for an
older generation is InProgress; then the rule of the object's kind; kinds without one
(custom resources above all) go by the standard conditions Stalled, Reconciling, Ready and
Available, and are Current with none, as an object with no status is done once it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitopsd.objects import Body, GroupKind, ObjectKey

MAX_MESSAGE_CHARS = 300
MAX_SHARED = 4096
"""Distinct healths `Assessments` keeps one instance of."""


class Status(StrEnum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    TERMINATING = "Terminating"
    NOT_FOUND = "NotFound"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Health:
    """A status with why: `reason` a short CamelCase word, `message` for people."""

    status: Status
    reason: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        # Controllers quote whole API errors in messages; the start says enough.
        if len(self.message) > MAX_MESSAGE_CHARS:
            object.__setattr__(self, "message", self.message[: MAX_MESSAGE_CHARS - 1] + "…")

    @property
    def healthy(self) -> bool:
        return self.status is Status.CURRENT

    def __str__(self) -> str:
        return ": ".join(part for part in (self.status, self.reason, self.message) if part)


def assess(body: Body | None) -> Health:
    """The health of `body` as the API server returns it; None is an object that does not exist."""
    if body is None:
        return Health(Status.NOT_FOUND)
    try:
        return _terminating(body) or _generation_behind(body) or _rule_for(body)(body)
    except _MalformedError as error:
        return Health(Status.UNKNOWN, "Malformed", str(error))


def overall(healths: Iterable[Health]) -> Status:
    """One status for many objects: Current when all are (or there are none), Failed when
    any is, InProgress otherwise (an Unknown, missing or terminating one is not done yet)."""
    statuses = {health.status for health in healths}
    if statuses <= {Status.CURRENT}:
        return Status.CURRENT
    return Status.FAILED if Status.FAILED in statuses else Status.IN_PROGRESS


@dataclass
class Assessments:
    """The health assessed last, by object and resourceVersion: a reconcile that finds an
    object unchanged since costs a lookup, not a new assessment."""

    held: dict[ObjectKey, tuple[str, Health]] = field(default_factory=dict)
    shared: dict[Health, Health] = field(default_factory=dict)
    """One instance of each health seen: most objects share a few (10,000 objects, about a
    megabyte less)."""

    def of(
        self, found: Mapping[ObjectKey, Body | None], keys: Iterable[ObjectKey]
    ) -> dict[ObjectKey, Health]:
        """The health of each of `keys`, from its live object in `found` (absent: NotFound);
        only the objects of `keys` are held for the next time."""
        healths, held = {}, {}
        for key in keys:
            body = found.get(key)
            version = str((body or {}).get("metadata", {}).get("resourceVersion") or "")
            before = self.held.get(key)
            if before and version and before[0] == version:
                now = before[1]
            else:
                now = self._shared(assess(body))
            healths[key] = now
            if version:
                held[key] = (version, now)
        self.held = held
        return healths

    def _shared(self, health: Health) -> Health:
        if len(self.shared) >= MAX_SHARED:  # messages with counts vary: start afresh
            self.shared.clear()
        return self.shared.setdefault(health, health)


def unhealthy(healths: Mapping[ObjectKey, Health]) -> list[tuple[ObjectKey, Health]]:
    """The objects that are not Current, Failed ones first, each group by key."""
    failing = [(key, health) for key, health in healths.items() if not health.healthy]
    return sorted(failing, key=lambda item: (item[1].status != Status.FAILED, item[0]))


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


# Reading fields: a value of the wrong type raises _MalformedError, which `assess` reports.


class _MalformedError(Exception):
    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(f"{where} should be {expected}, not {type(value).__name__}")


def _get(body: Body, path: str) -> Any:
    """The value at the dotted `path`, None when some part of it is missing."""
    value: Any = body
    keys = path.split(".")
    for depth, key in enumerate(keys):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _MalformedError(".".join(keys[:depth]), "an object", value)
        value = value.get(key)
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _MalformedError(where, "a string", value)
    return value


def _str(body: Body, path: str, default: str = "") -> str:
    return _text(_get(body, path), path) or default


def _maybe_int(body: Body, path: str) -> int | None:
    value = _get(body, path)
    if value is None:
        return None
    # bool is an int to Python, but `true` is no count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _MalformedError(path, "an integer", value)
    return value


def _int(body: Body, path: str, default: int) -> int:
    value = _maybe_int(body, path)
    return default if value is None else value


def _bool(body: Body, path: str) -> bool:
    value = _get(body, path)
    if value is not None and not isinstance(value, bool):
        raise _MalformedError(path, "a boolean", value)
    return value is True


def _list(body: Body, path: str) -> list[Any]:
    value = _get(body, path)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _MalformedError(path, "a list", value)
    return value


@dataclass(frozen=True, slots=True)
class _Condition:
    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str

    @property
    def true(self) -> bool:
        return self.status == "True"

    def decides(self, status: Status) -> Health:
        """`status`, explained by this condition."""
        fallback = self.type if self.true else f"Not{self.type}"
        return Health(status, self.reason or fallback, self.message)


def _conditions(body: Body) -> dict[str, _Condition]:
    items = _list(body, "status.conditions")
    conditions = (_condition(item, f"status.conditions[{i}]") for i, item in enumerate(items))
    return {condition.type: condition for condition in conditions}


def _condition(item: Any, where: str) -> _Condition:
    if not isinstance(item, dict):
        raise _MalformedError(where, "an object", item)
    fields = ("type", "status", "reason", "message")
    return _Condition(*(_text(item.get(field), f"{where}.{field}") for field in fields))


def _true_condition(conditions: dict[str, _Condition], type_: str) -> _Condition | None:
    condition = conditions.get(type_)
    return condition if condition is not None and condition.true else None


def _must_be_true(conditions: dict[str, _Condition], type_: str) -> Health:
    condition = conditions.get(type_)
    if condition is None:
        return Health(Status.IN_PROGRESS, "Pending", f"no {type_} condition yet")
    return condition.decides(Status.CURRENT if condition.true else Status.IN_PROGRESS)


# The rules every object goes through first.


def _terminating(body: Body) -> Health | None:
    requested = _str(body, "metadata.deletionTimestamp")
    if not requested:
        return None
    finalizers = ", ".join(str(name) for name in _list(body, "metadata.finalizers"))
    waiting = f", waiting for finalizers {finalizers}" if finalizers else ""
    return Health(Status.TERMINATING, "Deleting", f"deletion requested at {requested}{waiting}")


def _generation_behind(body: Body) -> Health | None:
    observed = _maybe_int(body, "status.observedGeneration")
    generation = _maybe_int(body, "metadata.generation")
    if observed is None or generation is None or observed == generation:
        return None
    message = f"status reflects generation {observed}, spec is at generation {generation}"
    return Health(Status.IN_PROGRESS, "ObservedGeneration", message)


def _rule_for(body: Body) -> Callable[[Body], Health]:
    api_version = _text(body.get("apiVersion"), "apiVersion")
    group = api_version.rpartition("/")[0]  # "" for the core group's "v1"
    kind = _text(body.get("kind"), "kind")
    return _KIND_RULES.get(GroupKind(group, kind), _by_conditions)


def _by_conditions(body: Body) -> Health:
    """kstatus's standard conditions, then the common Ready and Available."""
    conditions = _conditions(body)
    if stalled := _true_condition(conditions, "Stalled"):
        return stalled.decides(Status.FAILED)
    if reconciling := _true_condition(conditions, "Reconciling"):
        return reconciling.decides(Status.IN_PROGRESS)
    # Ready=False is InProgress, not Failed: without Stalled, the controller may yet succeed.
    for type_ in ("Ready", "Available"):
        if type_ in conditions:
            return _must_be_true(conditions, type_)
    return Health(Status.CURRENT)


# Workloads: the counts their controllers write, compared with what the spec asks for.


def _unobserved(body: Body) -> Health | None:
    """InProgress until the controller has written status: it always sets observedGeneration.
    (kstatus asks this of DaemonSets alone; the API server serves the others an empty status
    until their controller gets to them, which would look like zero replicas done.)"""
    if _get(body, "status.observedGeneration") is None:
        return Health(Status.IN_PROGRESS, "NoStatus", "the controller has not reported yet")
    return None


def _shortfall(body: Body, wanted: int, *counts: tuple[str, str]) -> Health | None:
    """InProgress for the first of `counts` (label, status field) below `wanted`."""
    for label, name in counts:
        have = _int(body, f"status.{name}", 0)
        if have < wanted:
            return Health(Status.IN_PROGRESS, "Rollout", f"{label} {have}/{wanted}")
    return None


def _surplus(body: Body, wanted: int, label: str) -> Health | None:
    existing = _int(body, "status.replicas", 0)
    if existing <= wanted:
        return None
    message = f"{label} pending termination: {existing} exist, {wanted} wanted"
    return Health(Status.IN_PROGRESS, "Rollout", message)


def _deployment(body: Body) -> Health:
    conditions = _conditions(body)
    progressing = conditions.get("Progressing")
    if progressing is not None and progressing.reason == "ProgressDeadlineExceeded":
        return progressing.decides(Status.FAILED)
    # Paused on purpose (Argo CD: Suspended): waiting for it would wait until someone resumes.
    if _bool(body, "spec.paused"):
        return Health(Status.CURRENT, "Paused", "spec.paused holds the rollout")
    return _unobserved(body) or _deployment_rollout(body) or _deployment_available(conditions)


def _deployment_rollout(body: Body) -> Health | None:
    wanted = _int(body, "spec.replicas", 1)
    return _shortfall(
        body,
        wanted,
        ("updated replicas", "updatedReplicas"),
        ("ready replicas", "readyReplicas"),
        ("available replicas", "availableReplicas"),  # ready for minReadySeconds
    ) or _surplus(body, wanted, "old replicas")


def _deployment_available(conditions: dict[str, _Condition]) -> Health:
    if not conditions:
        return Health(Status.CURRENT)
    return _must_be_true(conditions, "Available")


def _statefulset(body: Body) -> Health:
    return _unobserved(body) or _statefulset_rollout(body) or Health(Status.CURRENT)


def _statefulset_rollout(body: Body) -> Health | None:
    wanted = _int(body, "spec.replicas", 1)
    not_ready = _shortfall(body, wanted, ("ready replicas", "readyReplicas"))
    # OnDelete replaces a Pod only when someone deletes it: there is no rollout to wait for.
    if _str(body, "spec.updateStrategy.type", "RollingUpdate") == "OnDelete":
        return not_ready
    # Ordinals below the partition keep the old revision on purpose.
    partition = _int(body, "spec.updateStrategy.rollingUpdate.partition", 0)
    to_update = max(wanted - partition, 0)
    return (
        not_ready
        or _shortfall(body, to_update, ("updated replicas", "updatedReplicas"))
        or _surplus(body, wanted, "replicas")
        or (None if partition else _revision_pending(body))
    )


def _revision_pending(body: Body) -> Health | None:
    """The controller names the update revision current once every Pod runs it."""
    current = _str(body, "status.currentRevision")
    update = _str(body, "status.updateRevision")
    if current == update:
        return None
    return Health(Status.IN_PROGRESS, "Rollout", f"revision {update} replacing {current}")


def _daemonset(body: Body) -> Health:
    return _unobserved(body) or _daemonset_rollout(body) or Health(Status.CURRENT)


def _daemonset_rollout(body: Body) -> Health | None:
    return _shortfall(
        body,
        _int(body, "status.desiredNumberScheduled", 0),
        ("scheduled pods", "currentNumberScheduled"),
        ("updated pods", "updatedNumberScheduled"),
        ("ready pods", "numberReady"),
        ("available pods", "numberAvailable"),
    )


def _replicaset(body: Body) -> Health:
    # InProgress, not Failed, as in kstatus: the controller keeps retrying, and a failure
    # such as an exceeded quota clears once the quota allows.
    if failure := _true_condition(_conditions(body), "ReplicaFailure"):
        return failure.decides(Status.IN_PROGRESS)
    return _unobserved(body) or _replicaset_replicas(body) or Health(Status.CURRENT)


def _replicaset_replicas(body: Body) -> Health | None:
    wanted = _int(body, "spec.replicas", 1)
    return _shortfall(
        body,
        wanted,
        ("ready replicas", "readyReplicas"),
        ("available replicas", "availableReplicas"),
    ) or _surplus(body, wanted, "replicas")


def _job(body: Body) -> Health:
    conditions = _conditions(body)
    if failed := _true_condition(conditions, "Failed"):
        return failed.decides(Status.FAILED)
    # SuccessCriteriaMet comes first when a success policy decides (Kubernetes 1.31 and on).
    for type_ in ("Complete", "SuccessCriteriaMet"):
        if done := _true_condition(conditions, type_):
            return done.decides(Status.CURRENT)
    # As in kstatus: a suspended Job is not waiting to finish.
    if _bool(body, "spec.suspend"):
        return Health(Status.CURRENT, "Suspended", "spec.suspend holds the Job")
    return _job_progress(body)


def _job_progress(body: Body) -> Health:
    counts = ("active", "succeeded", "failed")
    active, succeeded, failed = (_int(body, f"status.{count}", 0) for count in counts)
    message = f"active {active}, succeeded {succeeded}, failed {failed}"
    return Health(Status.IN_PROGRESS, "Running" if active else "Pending", message)


def _cronjob(body: Body) -> Health:
    if _bool(body, "spec.suspend"):
        return Health(Status.CURRENT, "Suspended", "spec.suspend stops new runs")
    return Health(Status.CURRENT)


# Core kinds.


def _persistent_volume_claim(body: Body) -> Health:
    phase = _str(body, "status.phase")
    if phase == "Bound":
        return Health(Status.CURRENT)
    if phase == "Lost":
        return Health(Status.FAILED, "Lost", "the bound PersistentVolume no longer exists")
    # Also while a WaitForFirstConsumer storage class waits for a Pod to use the claim.
    return Health(Status.IN_PROGRESS, "Pending", f"phase {phase}" if phase else "no phase yet")


def _service(body: Body) -> Health:
    if _str(body, "spec.type", "ClusterIP") != "LoadBalancer":
        return Health(Status.CURRENT)
    if _list(body, "status.loadBalancer.ingress"):
        return Health(Status.CURRENT)
    return Health(Status.IN_PROGRESS, "Pending", "waiting for a load balancer address")


def _namespace(body: Body) -> Health:
    if _str(body, "status.phase") == "Terminating":
        return Health(Status.TERMINATING, "Deleting", "the namespace's objects are being deleted")
    return Health(Status.CURRENT)


def _pod(body: Body) -> Health:
    phase = _str(body, "status.phase")
    if phase == "Succeeded":
        return Health(Status.CURRENT, "Succeeded")
    if phase == "Failed":  # kstatus counts it done (Current); a failed run needs a look
        reason = _str(body, "status.reason", "Failed")  # e.g. Evicted
        return Health(Status.FAILED, reason, _str(body, "status.message"))
    if phase == "Running" and _true_condition(_conditions(body), "Ready"):
        return Health(Status.CURRENT)
    return Health(Status.IN_PROGRESS, phase or "Pending", "waiting for the Ready condition")


# Kinds that serve the API itself.


def _custom_resource_definition(body: Body) -> Health:
    conditions = _conditions(body)
    names = conditions.get("NamesAccepted")
    if names is not None and names.status == "False":  # a name clash: only a change fixes it
        return names.decides(Status.FAILED)
    return _must_be_true(conditions, "Established")


def _api_service(body: Body) -> Health:
    return _must_be_true(_conditions(body), "Available")


_KIND_RULES: dict[GroupKind, Callable[[Body], Health]] = {
    GroupKind("apps", "Deployment"): _deployment,
    GroupKind("apps", "StatefulSet"): _statefulset,
    GroupKind("apps", "DaemonSet"): _daemonset,
    GroupKind("apps", "ReplicaSet"): _replicaset,
    GroupKind("batch", "Job"): _job,
    GroupKind("batch", "CronJob"): _cronjob,
    GroupKind("", "PersistentVolumeClaim"): _persistent_volume_claim,
    GroupKind("", "Service"): _service,
    GroupKind("", "Namespace"): _namespace,
    GroupKind("", "Pod"): _pod,
    GroupKind("apiextensions.k8s.io", "CustomResourceDefinition"): _custom_resource_definition,
    GroupKind("apiregistration.k8s.io", "APIService"): _api_service,
}
