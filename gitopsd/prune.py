"""Carries a plan's prune out: deletes what the guards allowed (`plan.decide_prune`),
re-checking ownership on the live object right before each delete, which is preconditioned
on the uid and resourceVersion read. Nothing is pruned unless every apply succeeded: the
caller prunes last, and only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gitopsd.changes import Action, Outcome
from gitopsd.cluster import Cluster, Resource
from gitopsd.errors import ApplyError, ClusterError
from gitopsd.inventory import ApplySet, uid_prefix
from gitopsd.objects import GroupKind, ObjectKey
from gitopsd.plan import PruneDecision, Refusal
from gitopsd.sync_options import prune_disabled


@dataclass
class PruneResult:
    pruned: list[Outcome]
    refused: list[tuple[ObjectKey, Refusal]]
    error: ApplyError | None
    """The deletes that failed, if any; the others were carried out."""


def prune(
    cluster: Cluster,
    applyset: ApplySet,
    decision: PruneDecision,
    recorded: Mapping[ObjectKey, str],
    resource_of: Callable[[GroupKind], Resource | None],
    on_outcome: Callable[[Outcome], None] = lambda outcome: None,
) -> PruneResult:
    """Deletes what the decision allows, re-checking ownership right before each delete;
    tells `on_outcome` of each as it is gone."""
    result = PruneResult([], [], None)
    failures: list[ClusterError] = []
    for key in decision.delete:
        resource = resource_of(key.group_kind)
        if resource is None:  # no longer served since the decision: it cannot be seen
            result.refused.append((key, Refusal.DISCOVERY_INCOMPLETE))
            continue
        try:
            done = _prune_one(cluster, applyset, key, recorded, resource)
        except ClusterError as error:
            failures.append(ClusterError(f"{key}: delete failed: {error}", error.reason))
            continue
        if isinstance(done, Refusal):
            result.refused.append((key, done))
        else:  # deleted, or already gone
            result.pruned.append(Outcome(key, Action.PRUNED, version=resource.version))
            on_outcome(result.pruned[-1])
    if failures:
        result.error = ApplyError([str(f) for f in failures], failures[0].reason, action="prune")
    return result


def _prune_one(
    cluster: Cluster,
    applyset: ApplySet,
    key: ObjectKey,
    recorded: Mapping[ObjectKey, str],
    resource: Resource,
) -> Refusal | None:
    live = cluster.get(resource, key.namespace, key.name)
    if live is None:
        return None  # already gone
    if not applyset.owns(live) or recorded.get(key) != uid_prefix(live):
        return Refusal.NOT_OWNED
    if prune_disabled(live):
        return Refusal.DISABLED
    metadata = live["metadata"]
    cluster.delete(resource, key.namespace, key.name, metadata["uid"], metadata["resourceVersion"])
    return None
