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

The words are in `vocabulary`, the typed field readers the rules share in `fields`, the kind
rules by family in `workloads`, `jobs`, `core` and `definitions`, the conditions rule in
`generic`, and what of a status the rules read in `status_fields`. To add a kind rule, write
it in its family's module (a new family, a new module) and name it in `_KIND_RULES` below,
the one table of kind rules; a status field it reads that `STATUS_FIELDS` lacks goes there
too, or the watch cache drops it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gitopsd.health import core, definitions, jobs, workloads
from gitopsd.health.expressions import HealthCheck
from gitopsd.health.fields import MalformedError, list_, maybe_int, str_, text
from gitopsd.health.generic import by_conditions
from gitopsd.health.status_fields import EMPTY, STATUS_FIELDS, essentials
from gitopsd.health.vocabulary import MAX_MESSAGE_CHARS, Health, Status
from gitopsd.objects import Body, GroupKind, ObjectKey
from gitopsd.resources import CUSTOM_RESOURCE_DEFINITION, NAMESPACE

__all__ = [
    "EMPTY",
    "MAX_MESSAGE_CHARS",
    "MAX_SHARED",
    "STATUS_FIELDS",
    "Assessments",
    "Checks",
    "Health",
    "HealthCheck",
    "Status",
    "assess",
    "essentials",
    "overall",
    "unhealthy",
]

MAX_SHARED = 4096
"""Distinct healths `Assessments` keeps one instance of."""


Checks = Mapping[GroupKind, HealthCheck]
"""A source's own health rules (`expressions`), by the group and kind they replace the
built-in rule of."""


def assess(body: Body | None, checks: Checks | None = None) -> Health:
    """The health of `body` as the API server returns it; None is an object that does not
    exist. A kind `checks` has a rule for goes by that rule instead of the built-in one."""
    if body is None:
        return Health(Status.NOT_FOUND)
    try:
        return _terminating(body) or _generation_behind(body) or _rule_for(body, checks)(body)
    except MalformedError as error:
        return Health(Status.UNKNOWN, "Malformed", str(error))


def overall(healths: Iterable[Health]) -> Status:
    """One status for many objects: Current when all are (or there are none), Failed when
    any is, InProgress otherwise (an Unknown, missing or terminating one is not done yet)."""
    return overall_status({health.status for health in healths})


def overall_status(statuses: set[Status]) -> Status:
    """`overall`, of the statuses the objects have between them."""
    if statuses <= {Status.CURRENT}:
        return Status.CURRENT
    return Status.FAILED if Status.FAILED in statuses else Status.IN_PROGRESS


@dataclass
class Assessments:
    """The health assessed last, by object and resourceVersion: a reconcile that finds an
    object unchanged since costs a lookup, not a new assessment."""

    remembered: dict[ObjectKey, tuple[str, Health]] = field(default_factory=dict)
    shared: dict[Health, Health] = field(default_factory=dict)
    """One instance of each health seen: most objects share a few (10,000 objects, about a
    megabyte less)."""

    def of(
        self,
        found: Mapping[ObjectKey, Body | None],
        keys: Iterable[ObjectKey],
        checks: Checks | None = None,
    ) -> dict[ObjectKey, Health]:
        """The health of each of `keys`, from its live object in `found` (absent: NotFound);
        only the objects of `keys` are remembered for the next time."""
        healths: dict[ObjectKey, Health] = {}
        remembered: dict[ObjectKey, tuple[str, Health]] = {}
        for key in keys:
            healths[key] = self._assessed(key, found.get(key), checks, remembered)
        self.remembered = remembered
        return healths

    def again(
        self, found: Mapping[ObjectKey, Body | None], checks: Checks | None = None
    ) -> dict[ObjectKey, Health]:
        """The health of each of `found` (those whose status alone moved), remembered beside
        the others': the next `of` assesses none of them again."""
        return {
            key: self._assessed(key, body, checks, self.remembered) for key, body in found.items()
        }

    def _assessed(
        self,
        key: ObjectKey,
        body: Body | None,
        checks: Checks | None,
        remembered: dict[ObjectKey, tuple[str, Health]],
    ) -> Health:
        """`body`'s health, as remembered at its resourceVersion if it was; kept in
        `remembered`."""
        version = str((body or {}).get("metadata", {}).get("resourceVersion") or "")
        before = self.remembered.get(key)
        if before and version and before[0] == version:
            now = before[1]
        else:
            now = self._shared(assess(body, checks))
        if version:
            remembered[key] = (version, now)
        return now

    def _shared(self, health: Health) -> Health:
        if len(self.shared) >= MAX_SHARED:  # messages with counts vary: start afresh
            self.shared.clear()
        return self.shared.setdefault(health, health)


def unhealthy(healths: Mapping[ObjectKey, Health]) -> list[tuple[ObjectKey, Health]]:
    """The objects that are not Current, Failed ones first, each group by key."""
    failing = [(key, health) for key, health in healths.items() if not health.healthy]
    return sorted(failing, key=_failed_first)


def _failed_first(item: tuple[ObjectKey, Health]) -> tuple[bool, ObjectKey]:
    return item[1].status != Status.FAILED, item[0]


@dataclass(frozen=True)
class Digest:
    """Many objects' health in brief, as a status tells it: one pass over them, and only the
    first few that are not Current put in order (during a rollout, thousands are not)."""

    status: Status
    """`overall`."""
    total: int
    failing: int
    """How many are not Current."""
    first: list[tuple[ObjectKey, Health]]
    """The first of `unhealthy`, as many as asked for."""


def digest(healths: Mapping[ObjectKey, Health], shown: int) -> Digest:
    failing = [(key, health) for key, health in healths.items() if not health.healthy]
    status = overall(health for _, health in failing)
    first = heapq.nsmallest(shown, failing, key=_failed_first)
    return Digest(status, len(healths), len(failing), first)


# The rules every object goes through first.


def _terminating(body: Body) -> Health | None:
    requested = str_(body, "metadata.deletionTimestamp")
    if not requested:
        return None
    finalizers = ", ".join(str(name) for name in list_(body, "metadata.finalizers"))
    waiting = f", waiting for finalizers {finalizers}" if finalizers else ""
    return Health(Status.TERMINATING, "Deleting", f"deletion requested at {requested}{waiting}")


def _generation_behind(body: Body) -> Health | None:
    observed = maybe_int(body, "status.observedGeneration")
    generation = maybe_int(body, "metadata.generation")
    if observed is None or generation is None or observed == generation:
        return None
    message = f"status reflects generation {observed}, spec is at generation {generation}"
    return Health(Status.IN_PROGRESS, "ObservedGeneration", message)


def _rule_for(body: Body, checks: Checks | None) -> Callable[[Body], Health]:
    api_version = text(body.get("apiVersion"), "apiVersion")
    group = api_version.rpartition("/")[0]  # "" for the core group's "v1"
    group_kind = GroupKind(group, text(body.get("kind"), "kind"))
    check = (checks or {}).get(group_kind)
    return check.assess if check else _KIND_RULES.get(group_kind, by_conditions)


_KIND_RULES: dict[GroupKind, Callable[[Body], Health]] = {
    GroupKind("apps", "Deployment"): workloads.deployment,
    GroupKind("apps", "StatefulSet"): workloads.statefulset,
    GroupKind("apps", "DaemonSet"): workloads.daemonset,
    GroupKind("apps", "ReplicaSet"): workloads.replicaset,
    GroupKind("batch", "Job"): jobs.job,
    GroupKind("batch", "CronJob"): jobs.cronjob,
    GroupKind("", "PersistentVolumeClaim"): core.persistent_volume_claim,
    GroupKind("", "Service"): core.service,
    NAMESPACE: core.namespace,
    GroupKind("", "Pod"): core.pod,
    CUSTOM_RESOURCE_DEFINITION: (definitions.custom_resource_definition),
    GroupKind("apiregistration.k8s.io", "APIService"): definitions.api_service,
}
"""The rule of each kind that has one; any other kind goes `by_conditions`."""
