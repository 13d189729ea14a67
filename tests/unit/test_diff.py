"""Drift normalization, comparison, attribution and masking: golden input/output pairs."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import pytest

from gitopsd import diff, managed_fields, masking
from gitopsd.objects import ObjectKey

KEY = ObjectKey("apps", "Deployment", "ns", "web")


def deployment(replicas: int = 2, image: str = "nginx:1.27", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", **metadata},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "envoy:1"},
                        {"name": "web", "image": image, "env": [{"name": "MODE", "value": "prod"}]},
                    ]
                }
            },
        },
    }


def managed(
    manager: str,
    fields: dict[str, Any],
    operation: str = "Update",
    time: str = "2026-11-23T00:00:00Z",
) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "fieldsV1": fields, "time": time}


OURS = managed(
    "gitopsd",
    {
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {
                    "f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}
                }
            },
        }
    },
    "Apply",
)


@pytest.mark.parametrize(
    "field",
    [
        "status",
        "metadata.resourceVersion",
        "metadata.uid",
        "metadata.generation",
        "metadata.creationTimestamp",
        "metadata.managedFields",
    ],
)
def test_normalize_strips_what_the_server_owns(field: str) -> None:
    body = deployment()
    body["status"] = {"replicas": 2}
    body["metadata"] |= {
        "resourceVersion": "7",
        "uid": "u",
        "generation": 3,
        "creationTimestamp": "t",
        "managedFields": [OURS],
    }
    normal = diff.normalize(body)
    section, _, name = field.partition(".")
    assert name not in normal[section] if name else section not in normal
    assert body["status"] == {"replicas": 2}  # the input is left alone


def test_normalize_drops_the_last_applied_annotation_and_an_emptied_map() -> None:
    body = deployment(annotations={diff.LAST_APPLIED: '{"secret": "x"}'})
    assert "annotations" not in diff.normalize(body)["metadata"]


def test_equal_objects_have_no_drift() -> None:
    live = deployment(resourceVersion="9", managedFields=[OURS])
    assert diff.compare(KEY, deployment(), live, deployment()) is None


Edit = Callable[[dict[str, Any]], None]
CHANGES: dict[str, tuple[Edit, str, Any, Any]] = {
    "a scalar": (
        lambda b: b["spec"].update(replicas=5),
        "spec.replicas",
        5,
        2,
    ),
    "a field of a named list item, matched by name not position": (
        lambda b: b["spec"]["template"]["spec"]["containers"][1].update(image="nginx:2"),
        "spec.template.spec.containers[name=web].image",
        "nginx:2",
        "nginx:1.27",
    ),
    "a nested named list": (
        lambda b: b["spec"]["template"]["spec"]["containers"][1]["env"][0].update(value="dev"),
        "spec.template.spec.containers[name=web].env[name=MODE].value",
        "dev",
        "prod",
    ),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_change_is_named_with_both_values(change: str) -> None:
    edit, path, live_value, desired_value = CHANGES[change]
    live = deployment(managedFields=[OURS])
    edit(live)
    drift = diff.compare(KEY, deployment(), live, deployment())
    assert drift is not None and drift.state == diff.State.MODIFIED
    assert [(c.path, c.live, c.desired) for c in drift.changes] == [
        (path, live_value, desired_value)
    ]


def test_reordered_named_list_items_are_not_drift() -> None:
    live = deployment()
    live["spec"]["template"]["spec"]["containers"].reverse()
    assert diff.compare(KEY, deployment(), live, deployment()) is None


def test_the_manager_that_owns_a_drifted_field_is_named() -> None:
    scaler = managed("hpa-controller", {"f:spec": {"f:replicas": {}}})
    ours = copy.deepcopy(OURS)
    del ours["fieldsV1"]["f:spec"]["f:replicas"]
    live = deployment(replicas=7, managedFields=[ours, scaler])
    [change] = diff.compare(KEY, deployment(), live, deployment()).changes  # type: ignore[union-attr]
    assert change.manager == "hpa-controller"


def test_a_list_item_field_is_attributed_through_its_merge_key() -> None:
    editor = managed(
        "kubectl-set",
        {
            "f:spec": {
                "f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {"f:image": {}}}}}
            }
        },
    )
    live = deployment(image="nginx:9", managedFields=[OURS, editor])
    [change] = diff.compare(KEY, deployment(), live, deployment()).changes  # type: ignore[union-attr]
    assert (change.path, change.manager) == (
        "spec.template.spec.containers[name=web].image",
        "kubectl-set",
    )


def test_a_field_added_by_a_takeover_manager_is_drift_but_not_by_a_controller() -> None:
    labeller = managed("kubectl-label", {"f:metadata": {"f:labels": {"f:extra": {}}}})
    controller = managed(
        "kube-controller-manager", {"f:metadata": {"f:annotations": {"f:revision": {}}}}
    )
    live = deployment(
        labels={"extra": "yes"},
        annotations={"revision": "1"},
        managedFields=[OURS, labeller, controller],
    )
    expected = deployment(labels={"extra": "yes"}, annotations={"revision": "1"})  # SSA keeps both
    drift = diff.compare(KEY, expected, live, deployment())
    assert drift is not None
    assert [(c.path, c.live, c.desired, c.manager) for c in drift.changes] == [
        ("metadata.labels.extra", "yes", None, "kubectl-label")
    ]


def test_a_removed_field_names_the_latest_other_editor() -> None:
    early = managed("kubectl-edit", {"f:data": {}}, time="2026-01-01T00:00:00Z")
    late = managed("kubectl-patch", {"f:data": {}}, time="2026-06-01T00:00:00Z")
    live = deployment(managedFields=[OURS, early, late])
    del live["spec"]["replicas"]
    [change] = diff.compare(KEY, deployment(), live, deployment()).changes  # type: ignore[union-attr]
    assert (change.path, change.live, change.desired, change.manager) == (
        "spec.replicas",
        None,
        2,
        "kubectl-patch",
    )


def secret(**data: str) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": encoded}


def test_secret_values_are_masked_and_only_changed_keys_marked() -> None:
    key = ObjectKey("", "Secret", "ns", "s")
    drift = diff.compare(
        key,
        secret(a="CANARY-new", b="same"),
        secret(a="CANARY-old", b="same"),
        secret(a="CANARY-new", b="same"),
    )
    assert drift is not None
    assert [(c.path, c.live, c.desired) for c in drift.changes] == [
        ("data.a", masking.MASK, masking.MASK_CHANGED)
    ]
    assert "CANARY" not in repr(drift)


def test_string_data_counts_as_declared_data() -> None:
    patcher = managed("kubectl-patch", {"f:data": {"f:a": {}}})
    live = secret(a="CANARY-old") | {"metadata": {"name": "s", "managedFields": [patcher]}}
    declared = {**secret(), "stringData": {"a": "CANARY-new"}}
    drift = diff.compare(ObjectKey("", "Secret", "ns", "s"), secret(a="CANARY-new"), live, declared)
    assert drift is not None
    assert [(c.path, c.manager) for c in drift.changes] == [("data.a", "kubectl-patch")]


def test_missing_and_extraneous_secrets_are_masked() -> None:
    key = ObjectKey("", "Secret", "ns", "s")
    for drift in (diff.missing(key, secret(a="CANARY")), diff.extraneous(key, secret(a="CANARY"))):
        assert "Q0FOQVJZ" not in repr(drift) and "CANARY" not in repr(drift)


def test_redact_removes_every_form_of_a_secret_value() -> None:
    body = {"kind": "Secret", "stringData": {"token": "CANARY/0123 x"}}
    forms = masking.secret_values([body])
    message = 'bad value "CANARY/0123 x", encoded Q0FOQVJZLzAxMjMgeA== or CANARY%2F0123%20x'
    assert "CANARY" not in masking.redact(message, forms)
    assert "Q0FOQVJZ" not in masking.redact(message, forms)


def test_fields_of_lists_leaves_and_owned_items() -> None:
    assert managed_fields.fields_of(OURS) == {
        ("f:spec", "f:replicas"),
        ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}'),
        ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}', "f:image"),
        ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}', "f:name"),
    }
    assert managed_fields.render_raw(("f:spec", "f:containers", 'k:{"name":"web"}', "f:image")) == (
        '.spec.containers[{"name":"web"}].image'
    )
