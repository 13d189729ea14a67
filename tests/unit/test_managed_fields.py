"""managedFields read as Server-Side Apply writes them: who owns a field (a map owned whole,
list elements by key or value, ties), who removed one, what a takeover manager added that
git does not declare, and what a sync takes over and reports lost. (Drift's attribution,
through `diff.compare`: test_diff.py.)"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitopsd import managed_fields
from gitopsd.cluster.projection import Projection
from gitopsd.managed_fields import (
    added_out_of_band,
    gitopsd_fields,
    lost_fields,
    owned_version,
    owner,
    removal_owner,
    remove,
    same_ownership,
    takeover_patch,
)

TAKEOVER = ("kubectl-edit",)


def entry(
    manager: str, fields: dict[str, Any], operation: str = "Update", time: str = "2026-01-01"
) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "time": time, "fieldsV1": fields}


LIVE: dict[str, Any] = {
    "metadata": {"finalizers": ["first", "second"]},
    "spec": {"replicas": 3, "ports": [{"name": "http", "port": 80}], "paused": False},
}
REPLICAS: dict[str, Any] = {"f:spec": {"f:replicas": {}}}
PORT = 'k:{"name":"http"}'
SECOND = 'v:"second"'


OWNERS: dict[str, tuple[list[dict[str, Any]], tuple[Any, ...], str]] = {
    # managedFields, the field's path -> its owner
    "nobody": ([], ("spec", "replicas"), "unknown"),
    "a manager owning other fields only": (
        [entry("kubectl-edit", {"f:spec": {"f:paused": {}}})],
        ("spec", "replicas"),
        "unknown",
    ),
    "a manager owning nothing": ([entry("helm", {})], ("spec", "replicas"), "unknown"),
    "a map owned whole owns each field in it": (
        [entry("helm", {"f:spec": {}})],
        ("spec", "replicas"),
        "helm",
    ),
    "an entry without a manager's name": (
        [{"fieldsV1": REPLICAS}],
        ("spec", "replicas"),
        "unknown",
    ),
    "of two others, the first listed": (
        [entry("helm", REPLICAS), entry("kubectl-edit", REPLICAS)],
        ("spec", "replicas"),
        "helm",
    ),
    "another manager wins a tie with gitopsd": (
        [entry("gitopsd", REPLICAS, "Apply"), entry("hpa", REPLICAS)],
        ("spec", "replicas"),
        "hpa",
    ),
    "gitopsd keeps what a later entry does not own": (
        [entry("gitopsd", REPLICAS, "Apply"), entry("kubectl-edit", {"f:spec": {"f:paused": {}}})],
        ("spec", "replicas"),
        "gitopsd",
    ),
    "another manager wins a tie over the whole object": (
        [entry("gitopsd", REPLICAS, "Apply"), entry("hpa", {})],
        (),
        "hpa",
    ),
    "a list element by its key, beside the list itself": (
        [entry("helm", {"f:spec": {"f:ports": {".": {}, PORT: {"f:port": {}}}}})],
        ("spec", "ports", 0, "port"),
        "helm",
    ),
    "a list element no key names": (
        [entry("helm", {"f:spec": {"f:ports": {'k:{"name":"https"}': {"f:port": {}}}}})],
        ("spec", "ports", 0, "port"),
        "unknown",
    ),
    "an element past the live list's end": (
        [entry("helm", {"f:spec": {"f:ports": {PORT: {"f:port": {}}}}})],
        ("spec", "ports", 1, "port"),
        "unknown",
    ),
    "a set element by its value": (
        [entry("janitor", {"f:metadata": {"f:finalizers": {".": {}, SECOND: {}}}})],
        ("metadata", "finalizers", 1),
        "janitor",
    ),
    "a set element of another value": (
        [entry("janitor", {"f:metadata": {"f:finalizers": {".": {}, SECOND: {}}}})],
        ("metadata", "finalizers", 0),
        "unknown",
    ),
    "a field inside what is a number live": (
        [entry("hpa", REPLICAS)],
        ("spec", "replicas", "max"),
        "hpa",
    ),
}


@pytest.mark.parametrize("case", OWNERS, ids=list(OWNERS))
def test_the_owner_of_a_field(case: str) -> None:
    managed, path, expected = OWNERS[case]
    assert owner(managed, LIVE, path) == expected


REMOVERS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "nobody edited it": ([], "unknown"),
    "the latest other editor": (
        [entry("kubectl-edit", {}, time="2026-02-01"), entry("kubectl-patch", {}, time="2026-03")],
        "kubectl-patch",
    ),
    "never gitopsd": (
        [entry("kubectl-edit", {}, time="2026-02-01"), entry("gitopsd", {}, time="2026-03-01")],
        "kubectl-edit",
    ),
    "an edit, not an apply": (
        [entry("kubectl-edit", {}, time="2026-02-01"), entry("helm", {}, "Apply", "2026-03-01")],
        "kubectl-edit",
    ),
    "an edit of unknown time is the earliest": (
        [{"manager": "unknown-time", "operation": "Update"}, entry("kubectl-edit", {})],
        "kubectl-edit",
    ),
}


@pytest.mark.parametrize("case", REMOVERS, ids=list(REMOVERS))
def test_who_removed_a_field(case: str) -> None:
    managed, expected = REMOVERS[case]
    assert removal_owner(managed) == expected


def test_what_a_takeover_manager_added_and_git_does_not_declare() -> None:
    added = {
        "f:metadata": {"f:labels": {".": {}, "f:team": {}, "f:app": {}}},
        "f:spec": {
            "f:template": {"f:metadata": {}},
            "f:containers": {'k:{"name":"sidecar"}': {".": {}, "f:image": {}}},
        },
    }
    declared = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"template": ["not", "a", "map"], "containers": [{"name": "app"}]},
    }
    managed = [entry("kubectl-edit", added), entry("helm", {"f:data": {}})]

    assert added_out_of_band(managed, declared, TAKEOVER) == [
        ("f:metadata", "f:labels", "f:team"),
        ("f:spec", "f:template", "f:metadata"),
        ("f:spec", "f:containers", 'k:{"name":"sidecar"}'),
    ]


def test_a_raw_path_removes_a_nested_field_or_a_list_element() -> None:
    body = {
        "spec": {
            "template": {"metadata": {"labels": {"team": "ops", "app": "web"}}},
            "containers": [{"name": "app"}, {"name": "sidecar"}],
        }
    }
    remove(body, ("f:spec", "f:template", "f:metadata", "f:labels", "f:team"))
    remove(body, ("f:spec", "f:containers", 'k:{"name":"sidecar"}'))
    remove(body, ("f:spec", "f:containers", "f:name"))  # no field of a list: nothing
    remove(body, ("f:status", "f:replicas"))  # not there: nothing
    assert body == {
        "spec": {
            "template": {"metadata": {"labels": {"app": "web"}}},
            "containers": [{"name": "app"}],
        }
    }


def managed_body(*entries: dict[str, Any], version: str = "42") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version, "managedFields": list(entries)}}


def test_gitopsd_owns_the_fields_of_its_apply_entries_only() -> None:
    body = managed_body(
        entry("gitopsd", REPLICAS, "Apply"),
        entry("gitopsd", {"f:spec": {"f:paused": {}}}),  # an Update: not what it applied
        entry("helm", {"f:data": {}}, "Apply"),
    )
    assert gitopsd_fields(body) == {("f:spec", "f:replicas")}
    assert gitopsd_fields({"metadata": {}}) == set() == gitopsd_fields({})


def test_unchanged_ownership_is_the_same_fields_owned_by_gitopsd() -> None:
    applied = managed_body(entry("gitopsd", REPLICAS, "Apply"))
    assert same_ownership(
        applied, managed_body(entry("gitopsd", REPLICAS, "Apply"), entry("x", {}))
    )
    assert not same_ownership(applied, managed_body(entry("gitopsd", {"f:spec": {}}, "Apply")))


def test_each_field_gitopsd_took_from_another_manager_is_reported_lost() -> None:
    live = managed_body(
        entry("gitopsd", {"f:data": {"f:a": {}}}, "Apply"),
        entry("kubectl-edit", {"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:data": {}}),
        entry("helm", {"f:data": {"f:b": {}, "f:a": {}}}, "Apply"),
    )
    result = managed_body(
        entry("gitopsd", {"f:data": {"f:a": {}, "f:b": {}}, "f:spec": {"f:paused": {}}}, "Apply")
    )
    assert lost_fields(live, result) == [
        "kubectl-edit lost .spec.paused",
        "helm lost .data.a",
        "helm lost .data.b",
    ]


def test_a_takeover_merges_the_takeover_managers_fields_into_gitopsds_apply() -> None:
    ours = entry("gitopsd", {"f:spec": {"f:replicas": {}, "f:template": {"f:a": {}}}}, "Apply")
    edited = entry("kubectl-edit", {"f:spec": {"f:paused": {}, "f:template": {"f:b": {}}}})
    labelled = entry("kubectl-label", {"f:metadata": {"f:labels": {"f:team": {}}}})
    scaler = entry("hpa", {"f:spec": {"f:replicas": {}}})
    live = managed_body(scaler, ours, edited, labelled)

    patch = takeover_patch(live)

    merged: dict[str, Any] = {
        "f:spec": {"f:replicas": {}, "f:template": {"f:a": {}, "f:b": {}}, "f:paused": {}},
        "f:metadata": {"f:labels": {"f:team": {}}},
    }
    assert patch == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {
            "op": "replace",
            "path": "/metadata/managedFields",
            "value": [scaler, ours | {"fieldsV1": merged}],
        },
    ]
    assert ours["fieldsV1"] == {"f:spec": {"f:replicas": {}, "f:template": {"f:a": {}}}}


@pytest.mark.parametrize(
    "managed",
    [
        [entry("kubectl-edit", REPLICAS)],  # gitopsd never applied it
        [entry("gitopsd", REPLICAS, "Apply"), entry("hpa", REPLICAS)],  # no takeover manager
        [entry("gitopsd", REPLICAS), entry("kubectl-edit", REPLICAS)],  # gitopsd's Update only
    ],
)
def test_no_takeover_without_gitopsds_apply_and_a_takeover_managers_fields(
    managed: list[dict[str, Any]],
) -> None:
    assert takeover_patch(managed_body(*managed)) is None


# The owned version: what a dry-run of gitopsd's apply could find different.

GITOPSD_FIELDS: dict[str, Any] = {
    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {"f:image": {}}}}},
    },
}


def applied() -> dict[str, Any]:
    """A Deployment as gitopsd applied it, rolled out and annotated by its controller."""
    container = {"name": "web", "image": "web:1", "imagePullPolicy": "IfNotPresent"}
    revision: dict[str, Any] = {
        "f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"app": "web"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "managedFields": [
                entry("gitopsd", copy.deepcopy(GITOPSD_FIELDS), "Apply"),
                entry("kube-controller-manager", revision),
                {**entry("kube-controller-manager", {"f:status": {}}), "subresource": "status"},
            ],
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [container]}}},
        "status": {"readyReplicas": 2},
    }


def managers(body: dict[str, Any]) -> list[dict[str, Any]]:
    managed: list[dict[str, Any]] = body["metadata"]["managedFields"]
    return managed


def status_written(body: dict[str, Any]) -> None:
    body["status"] = {"readyReplicas": 1, "conditions": [{"type": "Available"}]}
    body["metadata"]["resourceVersion"] = "8"


def annotated_by_controller(body: dict[str, Any]) -> None:
    body["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "2"


def labelled_by_another_manager(body: dict[str, Any]) -> None:
    body["metadata"]["labels"]["team"] = "shop"
    managers(body).append(entry("helm", {"f:metadata": {"f:labels": {"f:team": {}}}}))


def image_changed(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "web:2"


def pull_policy_changed(body: dict[str, Any]) -> None:
    """A field of the container gitopsd does not own: defaulted by the server."""
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always"


def added_by_kubectl_edit(body: dict[str, Any]) -> None:
    body["spec"]["paused"] = True
    managers(body).append(entry("kubectl-edit", {"f:spec": {"f:paused": {}}}))


def replicas_taken_by_hpa(body: dict[str, Any]) -> None:
    """The HPA scales through the scale subresource: the field, and its value, are its own."""
    body["spec"]["replicas"] = 2  # the same value, yet gitopsd no longer owns it
    del managers(body)[0]["fieldsV1"]["f:spec"]["f:replicas"]
    hpa = entry("kube-controller-manager", REPLICAS)
    managers(body).append({**hpa, "subresource": "scale"})


def applied_again_later(body: dict[str, Any]) -> None:
    """The same fields written again: only the entry's time moves."""
    managers(body)[0]["time"] = "2026-12-05T08:00:00Z"
    body["metadata"]["resourceVersion"] = "9"


def recreated(body: dict[str, Any]) -> None:
    body["metadata"]["uid"] = "u2"


def applied_by_kubectl_once(body: dict[str, Any]) -> None:
    """kubectl's last-applied copy, which drift ignores as a projection drops it."""
    body["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    copied: dict[str, Any] = {"f:kubectl.kubernetes.io/last-applied-configuration": {}}
    managers(body).append(
        entry("kubectl-client-side-apply", {"f:metadata": {"f:annotations": copied}})
    )


OWNED_VERSIONS = {
    # a change of the live object -> whether it moves the owned version
    "status written": (status_written, False),
    "the controller's revision annotation": (annotated_by_controller, False),
    "a label another manager owns": (labelled_by_another_manager, False),
    "a default gitopsd does not own": (pull_policy_changed, False),
    "managedFields' time only": (applied_again_later, False),
    "a field of gitopsd's changed": (image_changed, True),
    "a field kubectl edit added": (added_by_kubectl_edit, True),
    "spec.replicas taken by an HPA": (replicas_taken_by_hpa, True),
    "deleted and created again": (recreated, True),
}


@pytest.mark.parametrize("case", OWNED_VERSIONS, ids=list(OWNED_VERSIONS))
def test_what_moves_the_owned_version(case: str) -> None:
    change, moves = OWNED_VERSIONS[case]
    changed = applied()
    change(changed)

    assert (owned_version(changed) != owned_version(applied())) == moves


def secret(password: str, *managed: dict[str, Any]) -> dict[str, Any]:
    """A Secret gitopsd applied with stringData: the server keeps it in data, and gitopsd's
    entry owns f:stringData, which no one else can take."""
    ours = entry("gitopsd", {"f:stringData": {"f:password": {}}}, "Apply")
    metadata = {"name": "db", "uid": "u1", "managedFields": [ours, *managed]}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": {"password": password},
    }


def test_a_secrets_data_changed_by_any_manager_moves_the_owned_version_of_its_string_data() -> None:
    """An edit by a program (not a takeover manager) takes data.password, no field of
    gitopsd's: the version moves all the same, so the edit is measured, found and healed."""
    edited = secret("ZWRpdGVk", entry("OpenAPI-Generator", {"f:data": {"f:password": {}}}))

    assert owned_version(edited) != owned_version(secret("b25l"))
    assert owned_version(secret("b25l")) == owned_version(secret("b25l"))


def test_the_owned_version_of_a_projection_is_that_of_the_whole_object() -> None:
    """A write's answer (whole) and its watch event (projected) are one state: kubectl's
    last-applied copy and status, which a projection drops, do not count."""
    whole = applied()
    applied_by_kubectl_once(whole)
    whole["status"]["collisionCount"] = 1  # health does not read it
    projected = Projection().of(whole)

    assert projected["metadata"]["annotations"] != whole["metadata"]["annotations"]
    assert projected["status"] != whole["status"]
    assert owned_version(projected) == owned_version(whole)


def test_a_list_key_is_parsed_once_and_a_long_one_is_never_kept() -> None:
    """A tenant's custom resource may key a list by any string: the cache of parsed keys
    keeps short ones only, so it holds at most 4,096 of CACHED_KEY_CHARS."""
    managed_fields._parsed.cache_clear()
    short = 'k:{"name":"app"}'
    long = 'k:{"name":"' + "x" * managed_fields.CACHED_KEY_CHARS + '"}'

    assert managed_fields._matches(short, {"name": "app"})
    assert managed_fields._matches(long, {"name": "x" * managed_fields.CACHED_KEY_CHARS})
    assert not managed_fields._matches(long, {"name": "y"})

    assert managed_fields._parsed.cache_info().currsize == 1
