"""Drift normalization, comparison, attribution and masking: golden input/output pairs."""

from __future__ import annotations

import base64
import copy
import datetime
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from gitopsd import diff, managed_fields, masking
from gitopsd.diff import FieldChange, State, held_as_live
from gitopsd.drift_policy import Item, read_rules
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
    body = deployment(annotations={diff.LAST_APPLIED: "{}", "team": "ops"})
    assert diff.normalize(body)["metadata"]["annotations"] == {"team": "ops"}


def test_a_fingerprint_is_the_hash_of_compact_json_with_sorted_keys() -> None:
    """The parent's stamps are made of it: the same body, in whatever key order and from
    whatever run, has the same fingerprint; a value JSON has no form for is taken as text."""
    body = {"b": [1, "x"], "a": {"c": None, "d": datetime.date(2026, 1, 2)}}
    canonical = b'{"a":{"c":null,"d":"2026-01-02"},"b":[1,"x"]}'
    assert diff.fingerprint(body) == hashlib.sha256(canonical).hexdigest()


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


def test_each_changed_field_is_named_however_much_of_its_map_changed() -> None:
    """Three of the pod spec's four fields are new: still each is named, and the image
    inside the named container, not the containers as a whole."""
    spec = {"hostname": "h", "subdomain": "s", "serviceAccountName": "sa"}
    expected = deployment(image="nginx:2")
    expected["spec"]["template"]["spec"] |= spec
    drift = diff.compare(KEY, expected, deployment(), expected)
    assert drift is not None
    assert sorted((c.path, c.live, c.desired) for c in drift.changes) == [
        ("spec.template.spec.containers[name=web].image", "nginx:1.27", "nginx:2"),
        ("spec.template.spec.hostname", None, "h"),
        ("spec.template.spec.serviceAccountName", None, "sa"),
        ("spec.template.spec.subdomain", None, "s"),
    ]


def containers(body: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = body["spec"]["template"]["spec"]["containers"]
    return found


def test_an_element_git_adds_or_removes_is_named_from_the_side_that_has_it() -> None:
    added = deployment()
    containers(added).append({"name": "proxy", "image": "envoy:2"})
    drift = diff.compare(KEY, added, deployment(), added)
    assert drift is not None
    assert [(c.path, c.live, c.desired) for c in drift.changes] == [
        ("spec.template.spec.containers[name=proxy].image", None, "envoy:2"),
        ("spec.template.spec.containers[name=proxy].name", None, "proxy"),
    ]
    assert drift.changes[0].place[4] == Item(2, "proxy")

    removed = diff.compare(KEY, deployment(), added, deployment())
    assert removed is not None
    assert [(c.path, c.live, c.desired) for c in removed.changes] == [
        ("spec.template.spec.containers[name=proxy].image", "envoy:2", None),
        ("spec.template.spec.containers[name=proxy].name", "proxy", None),
    ]


def test_a_map_git_adds_is_named_field_by_field_and_blamed_on_its_remover() -> None:
    editor = managed("kubectl-edit", {"f:metadata": {"f:labels": {}}})
    expected = deployment(labels={"app": "web", "team": "ops"})
    live = deployment(managedFields=[OURS, editor])
    drift = diff.compare(KEY, expected, live, expected)
    assert drift is not None
    assert [(c.path, c.live, c.desired, c.manager) for c in drift.changes] == [
        ("metadata.labels.app", None, "web", "kubectl-edit"),
        ("metadata.labels.team", None, "ops", "kubectl-edit"),
    ]


def test_lists_of_strings_and_of_unnamed_maps_are_compared_by_position() -> None:
    expected = deployment()
    containers(expected)[1]["args"] = ["--name", "web"]
    containers(expected)[1]["ports"] = [{"containerPort": 80}]
    live = copy.deepcopy(expected)
    containers(live)[1]["args"] = ["--name", "api"]
    containers(live)[1]["ports"] = [{"containerPort": 81}]
    drift = diff.compare(KEY, expected, live, expected)
    assert drift is not None
    assert [(c.path, c.live, c.desired) for c in drift.changes] == [
        ("spec.template.spec.containers[name=web].args[1]", "api", "web"),
        ("spec.template.spec.containers[name=web].ports[0].containerPort", 81, 80),
    ]


def test_reordered_named_list_items_are_not_drift() -> None:
    live = deployment()
    live["spec"]["template"]["spec"]["containers"].reverse()
    assert diff.compare(KEY, deployment(), live, deployment()) is None


def test_the_manager_that_owns_a_drifted_field_is_named() -> None:
    scaler = managed("hpa-controller", {"f:spec": {"f:replicas": {}}})
    later = managed("kubectl-label", {"f:metadata": {}}, time="2026-12-01T00:00:00Z")
    ours = copy.deepcopy(OURS)
    del ours["fieldsV1"]["f:spec"]["f:replicas"]
    live = deployment(replicas=7, managedFields=[ours, scaler, later])
    drift = diff.compare(KEY, deployment(), live, deployment())
    assert drift is not None
    [change] = drift.changes
    assert change.manager == "hpa-controller"  # not the latest editor: it owns the field
    assert (change.place, drift.key) == (("spec", "replicas"), KEY)
    assert (drift.live, drift.desired) == (diff.normalize(live), deployment())


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
    assert change.place == ("spec", "template", "spec", "containers", Item(1, "web"), "image")


def test_a_named_element_that_moved_and_changed_is_named_and_attributed_as_itself() -> None:
    """deepdiff gives a moved element's indices of the other side: read alone, they named
    the element that stood at web's place in the other list, and asked its manager."""
    editor = managed(
        "kubectl-set",
        {
            "f:spec": {
                "f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {"f:image": {}}}}}
            }
        },
    )
    live = deployment(image="nginx:9", managedFields=[OURS, editor])
    expected = deployment()
    containers(expected).insert(0, {"name": "extra", "image": "busybox:1"})

    drift = diff.compare(KEY, expected, live, expected)

    assert drift is not None
    web = [(c.path, c.live, c.desired, c.manager) for c in drift.changes if c.live is not None]
    assert web == [
        ("spec.template.spec.containers[name=web].image", "nginx:9", "nginx:1.27", "kubectl-set")
    ]
    assert {c.place[4] for c in drift.changes} == {Item(0, "extra"), Item(2, "web")}


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
    assert expected["metadata"]["labels"] == {"extra": "yes"}  # the dry-run result is left alone


def test_compare_leaves_the_dry_run_result_alone() -> None:
    """What a takeover manager added is taken out of a copy of it, however deep."""
    editor = managed("kubectl-edit", {"f:spec": {"f:paused": {}}})
    live = deployment(managedFields=[OURS, editor])
    live["spec"]["paused"] = True
    expected = copy.deepcopy(live)  # SSA keeps the field
    del expected["metadata"]["managedFields"]
    drift = diff.compare(KEY, expected, live, deployment())
    assert drift is not None and [c.path for c in drift.changes] == ["spec.paused"]
    assert expected["spec"]["paused"] is True


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
    """Beside the data git declares: a takeover manager's field of either is no drift."""
    patcher = managed("kubectl-patch", {"f:data": {"f:a": {}, "f:b": {}}})
    live = secret(a="CANARY-old", b="same")
    live["metadata"]["managedFields"] = [patcher]
    declared = {**secret(b="same"), "stringData": {"a": "CANARY-new"}}
    expected = secret(a="CANARY-new", b="same")
    drift = diff.compare(ObjectKey("", "Secret", "ns", "s"), expected, live, declared)
    assert drift is not None
    assert [(c.path, c.desired, c.manager) for c in drift.changes] == [
        ("data.a", masking.MASK_CHANGED, "kubectl-patch")
    ]


def test_missing_and_extraneous_secrets_are_masked() -> None:
    key = ObjectKey("", "Secret", "ns", "s")
    for drift in (diff.missing(key, secret(a="CANARY")), diff.extraneous(key, secret(a="CANARY"))):
        assert "Q0FOQVJZ" not in repr(drift) and "CANARY" not in repr(drift)


def test_a_missing_or_extraneous_object_is_shown_normalized() -> None:
    live = deployment(resourceVersion="9")
    assert diff.missing(KEY, deployment()) == diff.Drift(KEY, State.MISSING, desired=deployment())
    assert diff.extraneous(KEY, live) == diff.Drift(KEY, State.EXTRANEOUS, live=deployment())


@pytest.mark.parametrize(
    ("fields", "named"),
    [(["spec.selector", "spec.template"], "spec.selector, spec.template"), ([], "a field")],
)
def test_an_unchangeable_field_is_named_with_the_remedy(fields: list[str], named: str) -> None:
    drift = diff.unchangeable(KEY, fields, "replace it")
    why = f"git changes {named}, which cannot change once set; replace it"
    assert drift == diff.Drift(KEY, State.MODIFIED, reason=why)


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


def test_the_fields_of_an_object_not_this_sources_are_left_undecided() -> None:
    change = FieldChange("spec.replicas", 5, 2, "kubectl-edit", ("spec", "replicas"))
    unowned = diff.Drift(KEY, State.UNOWNED, (change,), reason="another source's")
    assert diff.decided(unowned, read_rules([{"action": "ignore"}], "test")) == unowned


def test_a_path_is_rendered_by_index_where_the_body_names_no_element() -> None:
    body = {"spec": {"ports": [{"name": 80}], "containers": [{"name": "web"}]}}
    assert diff.render_path(body, ("spec", "ports", 0, "port")) == "spec.ports[0].port"
    assert diff.render_path(body, ("spec", "containers", 1, "image")) == "spec.containers[1].image"
    assert diff.render_path(body, ("status", "conditions", 0)) == "status.conditions[0]"


def held(*place: Any, manager: str = "kubectl-edit", desired: Any = "git") -> FieldChange:
    """A field the drift policy holds, at `place`, edited live by `manager`."""
    return FieldChange("a path", "live", desired, manager, place)


WEB = Item(0, "web")
SIDECAR = Item(1, "sidecar")
HELD: dict[str, tuple[dict[str, Any], dict[str, Any], FieldChange, dict[str, Any]]] = {
    # git's body, the live object, the field held -> the body sent
    "nobody owns it: at its live value": (
        {"spec": {"replicas": 2}},
        {"spec": {"replicas": 5}},
        held("spec", "replicas", manager="unknown"),
        {"spec": {"replicas": 5}},
    ),
    "absent live, deep in the body: left out": (
        {"spec": {"template": {"a": 1, "b": 2}}},
        {"spec": {"template": {"b": 2}}},
        held("spec", "template", "a"),
        {"spec": {"template": {"b": 2}}},
    ),
    "an element by its index": (
        {"ports": [{"port": 80}]},
        {"ports": [{"port": 81}]},
        held("ports", Item(0), "port"),
        {"ports": [{"port": 81}]},
    ),
    "an element by its name, wherever it is live": (
        {"containers": [{"name": "web", "image": "1"}]},
        {"containers": [{"image": "x"}, {"name": "sidecar"}, {"name": "web", "image": "2"}]},
        held("containers", WEB, "image"),
        {"containers": [{"name": "web", "image": "2"}]},
    ),
    "an element absent live: left out": (
        {"containers": [{"name": "web"}, {"name": "sidecar", "image": "s"}]},
        {"containers": [{"name": "web"}]},
        held("containers", SIDECAR),
        {"containers": [{"name": "web"}]},
    ),
    "a field of an element git lacks: the element made for it": (
        {"containers": [{"name": "web"}]},
        {"containers": [{"name": "web"}, {"name": "sidecar", "image": "s"}]},
        held("containers", SIDECAR, "image", desired=None),
        {"containers": [{"name": "web"}, {"name": "sidecar", "image": "s"}]},
    ),
    "a whole element git lacks: added as it is live": (
        {"containers": [{"name": "web"}]},
        {"containers": [{"name": "web"}, {"name": "sidecar", "image": "s"}]},
        held("containers", SIDECAR, desired=None),
        {"containers": [{"name": "web"}, {"name": "sidecar", "image": "s"}]},
    ),
    "a whole element: as it is live": (
        {"containers": [{"name": "web", "image": "1"}]},
        {"containers": [{"name": "web", "image": "2", "args": ["x"]}]},
        held("containers", WEB),
        {"containers": [{"name": "web", "image": "2", "args": ["x"]}]},
    ),
    "in a list the body lacks: the list made for it": (
        {"spec": {}},
        {"spec": {"containers": [{"name": "web", "image": "2"}]}},
        held("spec", "containers", WEB, "image"),
        {"spec": {"containers": [{"name": "web", "image": "2"}]}},
    ),
    "an element past the live list's end: left out": (
        {"ports": [{"port": 1}, {"port": 2}]},
        {"ports": [{"port": 1}]},
        held("ports", Item(1), "port"),
        {"ports": [{"port": 1}, {}]},
    ),
    "under a value that is no map live: left out": (
        {"spec": {"template": {"metadata": {}}}},
        {"spec": {"template": "text"}},
        held("spec", "template", "metadata"),
        {"spec": {"template": {}}},
    ),
    "neither side has it, nor its parent: nothing": (
        {"spec": {}},
        {"spec": {}},
        held("spec", "x", "y"),
        {"spec": {}},
    ),
    "neither side has it: nothing": ({"spec": {}}, {}, held("spec", "x"), {"spec": {}}),
    "a key of what is a list in the body: nothing": (
        {"spec": {"ports": []}},
        {"spec": {"ports": {"port": 1}}},
        held("spec", "ports", "port"),
        {"spec": {"ports": []}},
    ),
    "a key of what is a list in the body, absent live: nothing": (
        {"spec": {"ports": []}},
        {},
        held("spec", "ports", "port"),
        {"spec": {"ports": []}},
    ),
    "an element of what is a map in the body: nothing": (
        {"spec": {"ports": {"a": 1}}},
        {"spec": {"ports": [{"port": 1}]}},
        held("spec", "ports", Item(0), "port"),
        {"spec": {"ports": {"a": 1}}},
    ),
}


@pytest.mark.parametrize("case", HELD, ids=list(HELD))
def test_a_held_field_is_sent_as_it_is_live(case: str) -> None:
    body, live, field, sent = HELD[case]
    assert held_as_live(body, live, [field]) == sent


def test_a_held_secret_value_drops_its_own_string_data_only() -> None:
    manifest = {"kind": "Secret", "immutable": False, "stringData": {"k": "git", "other": "kept"}}
    live = {"kind": "Secret", "immutable": True, "data": {"k": "bGl2ZQ=="}}
    sent = held_as_live(manifest, live, [held("data", "k"), held("immutable")])
    assert sent == {
        "kind": "Secret",
        "immutable": True,
        "stringData": {"other": "kept"},
        "data": {"k": "bGl2ZQ=="},
    }


def test_the_body_sent_is_a_copy_of_its_own() -> None:
    """Editing it changes neither git's body nor the live object."""
    body = {"containers": [{"name": "web", "args": ["git"]}]}
    live = {"containers": [{"name": "web", "args": ["live"]}]}
    sent = held_as_live(body, live, [held("containers", WEB)])
    sent["containers"][0]["args"].append("more")
    assert (body["containers"][0]["args"], live["containers"][0]["args"]) == (["git"], ["live"])
