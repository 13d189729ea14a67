"""`gitopsd tree`: the objects a daemon lists for a source, or a GitSync's record and status
read from the cluster, each with its health and its drift, and how the command shows them
(a table, or the ObjectTree document)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from gitopsd.changes import Target
from gitopsd.cli import documents, render
from gitopsd.cli.tree import recorded_tree
from gitopsd.cluster import Cluster, Resource
from gitopsd.daemon.control import owned_objects
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.errors import ClusterError
from gitopsd.gitsync.status import SourceReport, status_of
from gitopsd.health import Health, Status
from gitopsd.inventory import ApplySet
from gitopsd.objects import Body, GroupKind, ObjectKey, Origin
from tests.harness import contract

WEB = ObjectKey("apps", "Deployment", "shop", "web")
CFG = ObjectKey("", "ConfigMap", "shop", "cfg")
OLD = ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "old")
SHA = "0123456789abcdef0123456789abcdef01234567"
SOURCE = documents.source_reference("GitSync", "shop", "app")


def target(key: ObjectKey, api_version: str) -> Target:
    body = {"apiVersion": api_version, "kind": key.kind, "metadata": {"name": key.name}}
    return Target(key, body, Origin("x.yaml", 1), None)


def listed() -> list[dict[str, object]]:
    """Two objects of the revision (one scaled by hand), and one that left git."""
    targets = {WEB: target(WEB, "apps/v1"), CFG: target(CFG, "v1")}
    healths = {WEB: Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/1")}
    scaled = FieldChange("spec.replicas", 5, 2, "kubectl-scale")
    left = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
    drifts = [
        Drift(WEB, State.MODIFIED, (scaled,)),
        Drift(OLD, State.EXTRANEOUS, live=left),
    ]
    return owned_objects(targets, healths, drifts)


def test_each_object_has_its_version_health_and_drift_sorted_by_kind() -> None:
    found = listed()

    assert [entry["object"] for entry in found] == [
        {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "cfg"},
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "web",
        },
        {
            "group": "rbac.authorization.k8s.io",
            "version": "v1",
            "kind": "ClusterRole",
            "namespace": "",
            "name": "old",
        },
    ]
    assert [(e["health"]["status"], e["drift"], e["fields"]) for e in found] == [  # type: ignore[index]
        ("", "", []),
        ("InProgress", "modified", ["spec.replicas"]),
        ("", "extraneous", []),
    ]


def test_the_document_is_of_the_contract() -> None:
    source = documents.source_reference("Source", "", "app")

    found = contract.checked(documents.object_tree(source, SHA, listed()), "ObjectTree")

    assert found["objects"][1]["health"]["reason"] == "Rollout"


def test_the_table_names_each_object_with_its_health_and_the_fields_that_drifted() -> None:
    shown = render.object_table("app", {"revision": SHA, "objects": listed()})

    assert shown.splitlines() == [
        "app at revision 0123456789ab",
        "KIND                                   NAMESPACE  NAME  HEALTH      DRIFT",
        "ConfigMap                              shop       cfg   -           -",
        "apps/Deployment                        shop       web   InProgress  modified: "
        "spec.replicas",
        "rbac.authorization.k8s.io/ClusterRole  -          old   -           extraneous",
    ]


SERVED = {
    GroupKind("apps", "Deployment"): Resource("apps", "v1", "Deployment", "deployments", True),
    GroupKind("", "ConfigMap"): Resource("", "v1", "ConfigMap", "configmaps", True),
    GroupKind(OLD.group, OLD.kind): Resource(OLD.group, "v1", OLD.kind, "clusterroles", False),
}
APPLYSET = ApplySet("gitopsd-app", "shop")


@dataclass
class Discovery:
    def preferred(self, group_kind: GroupKind) -> Resource | None:
        return SERVED.get(group_kind)


@dataclass
class FakeCluster:
    """A cluster holding `bodies`: got by name, listed by kind, namespace and label."""

    bodies: list[Body]
    discovery: Discovery = field(default_factory=Discovery)

    def get(self, resource: Resource, namespace: str, name: str, projected: bool = False) -> Any:
        return next(
            (b for b in self._of(resource, namespace) if b["metadata"]["name"] == name), None
        )

    def list_objects(
        self, resource: Resource, namespace: str = "", selector: str = "", projected: bool = False
    ) -> list[Body]:
        label, _, value = selector.partition("=")
        listed = self._of(resource, namespace)
        return [b for b in listed if not label or b["metadata"]["labels"].get(label) == value]

    def keep_whole_status(self, kinds: Any) -> None:
        """Projections are not made here."""

    def _of(self, resource: Resource, namespace: str) -> list[Body]:
        return [
            b
            for b in self.bodies
            if b["kind"] == resource.kind and b["metadata"].get("namespace", "") == namespace
        ]


def member(key: ObjectKey, api_version: str) -> Body:
    metadata = {"name": key.name, "namespace": key.namespace, "labels": {}, "uid": "0a1b2c3d"}
    body = {"apiVersion": api_version, "kind": key.kind, "metadata": metadata}
    return APPLYSET.member(body)


def read(*bodies: Body, report: SourceReport | None = None) -> tuple[Any, list[str]]:
    status = status_of(1, report or SourceReport(applied_revision=SHA, drifts=[]), None)
    return recorded_tree(cast(Cluster, FakeCluster(list(bodies))), APPLYSET, status)


def test_a_records_objects_have_their_health_now_and_their_drift_from_the_status() -> None:
    """The status the daemon writes names each drifted object as the record's key is
    named, core and cluster-scoped kinds alike; a recorded object that is gone is
    NotFound at the version the cluster serves its kind at."""
    parent = APPLYSET.parent({WEB: "0a1b2c3d", CFG: "0a1b2c3d", OLD: "0a1b2c3d"})
    edited = FieldChange("rules", [], [{}], "kubectl-edit")
    drifts = [Drift(WEB, State.MISSING), Drift(OLD, State.MODIFIED, (edited,))]
    report = SourceReport(applied_revision=SHA, drifts=drifts)

    found, notes = read(
        parent, member(CFG, "v1"), member(OLD, "rbac.authorization.k8s.io/v1"), report=report
    )

    tree = contract.checked(
        documents.object_tree(SOURCE, found["revision"], found["objects"]), "ObjectTree"
    )
    assert tree["revision"] == SHA
    assert [
        (
            e["object"]["name"],
            e["object"]["version"],
            e["health"]["status"],
            e["drift"],
            e["fields"],
        )
        for e in tree["objects"]
    ] == [
        ("cfg", "v1", "Current", "", []),
        ("web", "v1", "NotFound", "missing", []),
        ("old", "v1", "Current", "modified", ["rules"]),
    ]
    assert notes == ["health as read now; drift as the daemon measured it last (its status)"]


def test_before_a_first_sync_the_tree_is_empty_and_says_so() -> None:
    found, notes = read()

    assert found["objects"] == []
    assert notes == ["no record yet (ConfigMap/shop/gitopsd-app): app has not synced"]


def test_a_parent_another_tool_wrote_is_refused() -> None:
    parent = APPLYSET.parent({CFG: "0a1b2c3d"})
    parent["metadata"]["annotations"]["applyset.kubernetes.io/tooling"] = "kubectl/v1.30"

    with pytest.raises(ClusterError, match="not the ApplySet parent of source app: its tooling"):
        read(parent, member(CFG, "v1"))
