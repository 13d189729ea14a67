"""Carrying a prune decision out: each delete is preceded by a last look at the live object
and preconditioned on what that look saw; what changed since the decision is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from gitopsd.changes import Action, Outcome
from gitopsd.cluster import Cluster
from gitopsd.errors import ApplyError, ClusterError, ClusterReason
from gitopsd.inventory import ApplySet, uid_prefix
from gitopsd.objects import Body, GroupKind, ObjectKey, Resource
from gitopsd.plan import PruneDecision, Refusal
from gitopsd.prune import PruneResult, prune

APPLYSET = ApplySet("gitopsd-app", "team")
CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)


def key(name: str) -> ObjectKey:
    return ObjectKey("", "ConfigMap", "team", name)


def config_map(name: str, uid: str, **annotations: str) -> Body:
    metadata = {
        "name": name,
        "uid": uid,
        "resourceVersion": f"v-{name}",
        "labels": {"applyset.kubernetes.io/part-of": APPLYSET.id},
        "annotations": annotations,
    }
    return {"metadata": metadata}


@dataclass
class FakeCluster:
    """Live config maps by name; records each delete with the preconditions it carried."""

    live: dict[str, Body]
    refusing: dict[str, ClusterError] = field(default_factory=dict)
    deleted: list[tuple[str, str, str]] = field(default_factory=list)

    def get(self, resource: Resource, namespace: str, name: str) -> Body | None:
        assert (resource, namespace) == (CONFIG_MAPS, "team")
        return self.live.get(name)

    def delete(self, resource: Resource, namespace: str, name: str, uid: str, version: str) -> bool:
        assert (resource, namespace) == (CONFIG_MAPS, "team")
        if name in self.refusing:
            raise self.refusing[name]
        self.deleted.append((name, uid, version))
        return self.live.pop(name) is not None


def served(group_kind: GroupKind) -> Resource | None:
    return CONFIG_MAPS if group_kind == GroupKind("", "ConfigMap") else None


def record_of(cluster: FakeCluster, **more: str) -> dict[ObjectKey, str]:
    """What the source recorded: the objects that live now, as they are, and `more`."""
    record = {key(name): uid_prefix(body) for name, body in cluster.live.items()}
    return record | {key(name): uid for name, uid in more.items()}


def carry_out(
    cluster: FakeCluster, keys: list[ObjectKey], record: Mapping[ObjectKey, str]
) -> PruneResult:
    """Deletes `keys`, as a decision allowed them."""
    decision = PruneDecision(tuple(keys), ())
    return prune(cast(Cluster, cluster), APPLYSET, decision, record, served)


def test_each_object_is_deleted_as_it_was_seen_and_told_of_as_it_is_gone() -> None:
    cluster = FakeCluster({"a": config_map("a", "a-1"), "b": config_map("b", "b-1")})
    decision = PruneDecision((key("b"), key("a")), ())
    told: list[Outcome] = []

    result = prune(
        cast(Cluster, cluster), APPLYSET, decision, record_of(cluster), served, told.append
    )

    assert cluster.deleted == [("b", "b-1", "v-b"), ("a", "a-1", "v-a")]
    assert (
        result.pruned
        == told
        == [Outcome(key("b"), Action.PRUNED, "", "v1"), Outcome(key("a"), Action.PRUNED, "", "v1")]
    )
    assert (result.refused, result.error) == ([], None)


def test_an_object_already_gone_counts_as_pruned_without_a_delete() -> None:
    cluster = FakeCluster({"a": config_map("a", "a-1")})

    result = carry_out(cluster, [key("gone"), key("a")], record_of(cluster, gone="0badc0de"))

    assert cluster.deleted == [("a", "a-1", "v-a")]
    assert [outcome.key for outcome in result.pruned] == [key("gone"), key("a")]


def test_what_changed_hands_or_opted_out_since_the_decision_is_refused() -> None:
    relabelled = config_map("relabelled", "r-1")
    relabelled["metadata"]["labels"] = {}
    cluster = FakeCluster(
        {
            "relabelled": relabelled,
            "recreated": config_map("recreated", "r-2"),
            "opted-out": config_map("opted-out", "o-1", **{"gitopsd.io/prune": "disabled"}),
            "a": config_map("a", "a-1"),
        }
    )
    names = ("relabelled", "recreated", "opted-out", "a")

    result = carry_out(cluster, [key(name) for name in names], record_of(cluster, recreated="r1"))

    assert cluster.deleted == [("a", "a-1", "v-a")]
    assert result.refused == [
        (key("relabelled"), Refusal.NOT_OWNED),
        (key("recreated"), Refusal.NOT_OWNED),
        (key("opted-out"), Refusal.DISABLED),
    ]


def test_an_object_of_a_kind_no_longer_served_is_refused_and_the_rest_pruned() -> None:
    cluster = FakeCluster({"a": config_map("a", "a-1")})
    widget = ObjectKey("example.com", "Widget", "team", "w")

    result = carry_out(cluster, [widget, key("a")], {**record_of(cluster), widget: "0badc0de"})

    assert result.refused == [(widget, Refusal.DISCOVERY_INCOMPLETE)]
    assert cluster.deleted == [("a", "a-1", "v-a")]


def test_failed_deletes_are_one_error_naming_each_and_the_others_are_carried_out() -> None:
    cluster = FakeCluster(
        {name: config_map(name, f"{name}-1") for name in ("a", "b", "c")},
        refusing={
            "a": ClusterError("forbidden", ClusterReason.FORBIDDEN),
            "c": ClusterError("timed out", ClusterReason.TIMEOUT),
        },
    )

    result = carry_out(cluster, [key("a"), key("b"), key("c")], record_of(cluster))

    assert cluster.deleted == [("b", "b-1", "v-b")]
    assert isinstance(result.error, ApplyError)
    assert result.error.failures == [
        f"{key('a')}: delete failed: forbidden",
        f"{key('c')}: delete failed: timed out",
    ]
    assert (result.error.reason, result.error.action) == (ClusterReason.FORBIDDEN, "prune")
    assert [outcome.key for outcome in result.pruned] == [key("b")]
