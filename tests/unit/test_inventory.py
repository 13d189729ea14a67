"""ApplySet ownership (KEP-3659): ids, member labels and the parent's record."""

from __future__ import annotations

import base64
import hashlib

from gitopsd.inventory import ApplySet, recorded_group_kinds, recorded_namespaces
from gitopsd.objects import APPLYSET_PART_OF_LABEL, GroupKind

APPLYSET = ApplySet("web", "gitops")


def test_the_id_follows_kep_3659() -> None:
    digest = hashlib.sha256(b"web.gitops.ConfigMap.").digest()  # <name>.<namespace>.<kind>.<group>
    unpadded = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    assert APPLYSET.id == f"applyset-{unpadded}-v1"
    assert len(APPLYSET.id) <= 63  # it is a label value
    assert ApplySet("web", "other").id != APPLYSET.id


def test_members_are_labelled_without_touching_the_input() -> None:
    body = {"metadata": {"name": "x", "labels": {"app": "web"}}}
    member = APPLYSET.member(body)
    assert member["metadata"]["labels"] == {"app": "web", APPLYSET_PART_OF_LABEL: APPLYSET.id}
    assert body["metadata"]["labels"] == {"app": "web"}
    assert APPLYSET.owns(member)
    assert not APPLYSET.owns(body)
    assert not ApplySet("web", "other").owns(member)


def test_the_parent_records_group_kinds_and_other_namespaces() -> None:
    kinds = {GroupKind("apps", "Deployment"), GroupKind("", "ConfigMap")}
    parent = APPLYSET.parent(kinds, {"gitops", "team", ""})
    annotations = parent["metadata"]["annotations"]
    assert annotations["applyset.kubernetes.io/contains-group-kinds"] == "ConfigMap,Deployment.apps"
    assert annotations["applyset.kubernetes.io/additional-namespaces"] == "team"
    assert parent["metadata"]["labels"] == {"applyset.kubernetes.io/id": APPLYSET.id}
    assert recorded_group_kinds(parent) == kinds
    assert recorded_namespaces(parent, "gitops") == {"gitops", "team"}
    assert recorded_group_kinds(None) == set()
