"""ApplySet ownership (KEP-3659): ids, member labels and the parent's record."""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid
import zlib

import pytest

from gitopsd.inventory import (
    ApplySet,
    decode_record,
    encode_record,
    recorded,
    uid_prefix,
)
from gitopsd.objects import APPLYSET_PART_OF_LABEL, ObjectKey
from gitopsd.synchooks import HOOK_OF_LABEL

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


def test_a_hook_is_labelled_as_the_sets_hook_and_never_as_a_member() -> None:
    claimed = {"app": "web", APPLYSET_PART_OF_LABEL: APPLYSET.id}
    body = {"metadata": {"name": "migrate", "labels": claimed}}
    hook = APPLYSET.hook(body)
    assert hook["metadata"]["labels"] == {"app": "web", HOOK_OF_LABEL: APPLYSET.id}
    assert body["metadata"]["labels"] == claimed
    assert APPLYSET.owns_hook(hook) and not APPLYSET.owns(hook)
    assert not ApplySet("web", "other").owns_hook(hook)
    assert not APPLYSET.owns_hook(body)
    assert APPLYSET.hook({"metadata": {"name": "unlabelled"}})["metadata"]["labels"] == {
        HOOK_OF_LABEL: APPLYSET.id
    }


def test_the_parent_records_its_members_and_where_they_live() -> None:
    record = {
        ObjectKey("apps", "Deployment", "team", "web"): "0a1b2c3d",
        ObjectKey("", "ConfigMap", "gitops", "settings"): "4e5f6a7b",
        ObjectKey("", "ConfigMap", "shop", "settings"): "2a3b4c5d",
        ObjectKey("", "Namespace", "", "team"): "8c9d0e1f",
    }
    parent = APPLYSET.parent(record)
    assert (parent["apiVersion"], parent["kind"]) == ("v1", "ConfigMap")
    assert (parent["metadata"]["name"], parent["metadata"]["namespace"]) == ("web", "gitops")
    assert list(parent["binaryData"]) == ["inventory"]  # no stamps given, none kept
    annotations = parent["metadata"]["annotations"]
    assert annotations["applyset.kubernetes.io/contains-group-kinds"] == (
        "ConfigMap,Deployment.apps,Namespace"
    )
    assert annotations["applyset.kubernetes.io/additional-namespaces"] == "shop,team"
    assert annotations["applyset.kubernetes.io/tooling"] == "gitopsd/v1"
    assert parent["metadata"]["labels"] == {"applyset.kubernetes.io/id": APPLYSET.id}
    assert recorded(parent) == record
    assert APPLYSET.foreign(parent) is None
    assert recorded(None) == {}


def test_the_record_is_compact_json_grouped_by_group_kind_and_namespace() -> None:
    record = {
        ObjectKey("", "ConfigMap", "team", "b"): "4e5f6a7b",
        ObjectKey("", "ConfigMap", "team", "a"): "0a1b2c3d",
        ObjectKey("apps", "Deployment", "team", "web"): "8c9d0e1f",
    }
    assert zlib.decompress(encode_record(record)) == (
        b'{"format":"gitopsd.io/inventory-v1","objects":[["","ConfigMap","team",'
        b'[["a","0a1b2c3d"],["b","4e5f6a7b"]]],["apps","Deployment","team",[["web","8c9d0e1f"]]]]}'
    )


def test_a_uid_is_recorded_by_its_first_eight_hex_digits() -> None:
    assert uid_prefix({"metadata": {"uid": "0a1b-2c3d-4e5f-6a7b"}}) == "0a1b2c3d"
    assert uid_prefix({"metadata": {"name": "never-created"}}) == ""


def test_one_naming_rule_for_every_source() -> None:
    assert ApplySet.of_source("web", "gitops") == ApplySet("gitopsd-web", "gitops")
    assert ApplySet.of_source("gitopsd-web", "gitops").name == "gitopsd-gitopsd-web"


def test_a_record_of_50000_objects_fits_a_configmap() -> None:
    """Realistic, varied names (two words of 600, a role, a number) across 100 namespaces."""
    chooser = random.Random(7)  # noqa: S311 - test data, not crypto
    words = [
        "".join(chooser.choices(string.ascii_lowercase, k=chooser.randint(4, 10)))
        for _ in range(600)
    ]
    kinds = [
        ("apps", "Deployment"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("monitoring.coreos.com", "ServiceMonitor"),
    ]
    record: dict[ObjectKey, str] = {}
    while len(record) < 50_000:
        group, kind = chooser.choice(kinds)
        role = chooser.choice(["api", "web", "db"])
        name = f"{chooser.choice(words)}-{chooser.choice(words)}-{role}"
        key = ObjectKey(
            group, kind, f"team-{chooser.choice(words[:100])}", f"{name}-{chooser.randint(0, 99)}"
        )
        record[key] = uuid.UUID(int=chooser.getrandbits(128)).hex[:8]
    encoded = APPLYSET.parent(record)["binaryData"]["inventory"]
    assert len(base64.b64decode(encoded)) < 800 * 1024  # the ConfigMap limit is 1 MiB
    assert decode_record(base64.b64decode(encoded)) == record


UNREADABLE = "its record cannot be read: "
TAMPERED = {
    "another tool's parent": (
        {"metadata__annotations__applyset.kubernetes.io/tooling": "kubectl/v1.34"},
        "its tooling is 'kubectl/v1.34', not 'gitopsd/v1'",
    ),
    "another set's id": (
        {"metadata__labels__applyset.kubernetes.io/id": "applyset-x-v1"},
        f"its label applyset.kubernetes.io/id is not this source's id {APPLYSET.id}",
    ),
    "a record that is not zlib": (
        {"binaryData__inventory": base64.b64encode(b"not zlib").decode()},
        UNREADABLE + "it is not a record gitopsd wrote",
    ),
    "a record with more than base64 in it": (
        {"binaryData__inventory": "!" + base64.b64encode(encode_record({})).decode()},
        UNREADABLE,
    ),
    "a record in another format": (
        {"binaryData__inventory": base64.b64encode(zlib.compress(b'{"format": "x"}')).decode()},
        UNREADABLE + "it is not in the format gitopsd.io/inventory-v1",
    ),
    "a zip bomb": (
        {"binaryData__inventory": base64.b64encode(zlib.compress(b" " * (65 * 2**20))).decode()},
        UNREADABLE + "it inflates to more than 67108864 bytes",
    ),
}


@pytest.mark.parametrize("case", TAMPERED, ids=list(TAMPERED))
def test_a_parent_that_is_not_this_sources_is_named_as_such(case: str) -> None:
    changes, reason = TAMPERED[case]
    parent = APPLYSET.parent({ObjectKey("", "ConfigMap", "gitops", "a"): "0a1b2c3d"})
    for path, value in changes.items():
        section, *rest = path.split("__")
        if section == "binaryData":
            parent["binaryData"][rest[0]] = value
        else:
            parent["metadata"][rest[0]][rest[1]] = value
    found = APPLYSET.foreign(parent)
    assert found is not None
    assert found == reason if reason != UNREADABLE else found.startswith(reason)
