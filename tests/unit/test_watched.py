"""What a source's reader lists and watches: where git and its own record put objects,
never what its parent's editable annotations claim, within its confinement and a limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest

from gitopsd.changes import Target
from gitopsd.cluster import Cluster, Resource
from gitopsd.errors import ManifestError
from gitopsd.inventory import ApplySet
from gitopsd.objects import GroupKind, ObjectKey
from gitopsd.reconcile.live import Bounds, watched

APPLYSET = ApplySet("gitopsd-app", "team")
CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", namespaced=True)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False)
SERVED = {GroupKind(r.group, r.kind): r for r in (CONFIG_MAPS, DEPLOYMENTS, ROLES)}


@dataclass
class Discovery:
    served: dict[GroupKind, Resource] = field(default_factory=lambda: SERVED)

    def preferred(self, group_kind: GroupKind) -> Resource | None:
        return self.served.get(group_kind)


@dataclass
class FakeCluster:
    discovery: Discovery = field(default_factory=Discovery)


CLUSTER = cast(Cluster, FakeCluster())


def key(kind: str, namespace: str, name: str = "x") -> ObjectKey:
    return ObjectKey(SERVED_GROUP[kind], kind, namespace, name)


SERVED_GROUP = {gk.kind: gk.group for gk in SERVED} | {"Widget": "example.com"}


def targets(*keys: ObjectKey) -> dict[ObjectKey, Target]:
    return {k: cast(Target, None) for k in keys}


def test_the_record_and_git_decide_what_is_watched_never_the_annotations() -> None:
    """However the parent's annotations are edited (400 namespaces, 8 kinds, or nothing),
    what is watched comes from the record and the targets: one scope per kind and
    namespace they name."""
    record = {key("Deployment", "team"): "0a1b2c3d", key("ConfigMap", "other"): "4e5f6a7b"}

    found = watched(Bounds(), CLUSTER, record, targets(key("ConfigMap", "team")))

    assert found == {
        (GroupKind("apps", "Deployment"), "team"): DEPLOYMENTS,
        (GroupKind("", "ConfigMap"), "other"): CONFIG_MAPS,
        (GroupKind("", "ConfigMap"), "team"): CONFIG_MAPS,
    }


def test_a_confined_source_watches_and_records_nothing_outside_its_namespace() -> None:
    forged = {
        key("ConfigMap", "kube-system"): "0a1b2c3d",
        key("ClusterRole", ""): "4e5f6a7b",
        key("ConfigMap", "team"): "8c9d0e1f",
    }
    bounds = Bounds(confined_to="team")

    found = watched(bounds, CLUSTER, forged, targets(key("Deployment", "team")))

    assert set(found) == {
        (GroupKind("", "ConfigMap"), "team"),
        (GroupKind("apps", "Deployment"), "team"),
    }
    parent = APPLYSET.parent(forged)
    assert bounds.record(parent) == {key("ConfigMap", "team"): "8c9d0e1f"}
    assert Bounds().record(parent) == forged


def test_a_kind_not_served_now_is_not_listed() -> None:
    record = {key("Widget", "team"): "0a1b2c3d"}
    assert watched(Bounds(), CLUSTER, record, {}) == {}


def test_what_a_source_watches_is_bounded() -> None:
    record = {key("ConfigMap", f"ns-{n}"): "0a1b2c3d" for n in range(400)}
    assert len(watched(Bounds(max_watches=400), CLUSTER, record, {})) == 400

    with pytest.raises(ManifestError) as refused:
        watched(Bounds(max_watches=399), CLUSTER, record, {})

    assert refused.value.reason == "size_limit"
    assert "lie in 400 kinds x namespaces" in str(refused.value)
    assert "over the limit of 399" in str(refused.value)
    assert "(--max-watches, limits.maxWatches)" in str(refused.value)
