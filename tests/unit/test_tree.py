"""`gitopsd tree`: the objects a daemon lists for a source, each with its health and its
drift, and how the command shows them (a table, or the ObjectTree document)."""

from __future__ import annotations

from gitopsd.changes import Target
from gitopsd.cli import documents, render
from gitopsd.daemon.control import owned_objects
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.health import Health, Status
from gitopsd.objects import ObjectKey, Origin
from tests.harness import contract

WEB = ObjectKey("apps", "Deployment", "shop", "web")
CFG = ObjectKey("", "ConfigMap", "shop", "cfg")
OLD = ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "old")
SHA = "0123456789abcdef0123456789abcdef01234567"


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
