"""The drift policy, as a table: each action and each matcher decides a drifted field, the
first rule that matches wins, an object's own rules come first, and what a write sends for
a held field keeps it as it is live. Invalid rules are refused, naming the rule and field."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsd import diff
from gitopsd.config import Limits
from gitopsd.diff import Drift, FieldChange, State, held_as_live
from gitopsd.drift_policy import Item, object_rules, read_rules
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.manifests import parse_file
from gitopsd.manifests.identity import manifests_of
from gitopsd.objects import ObjectKey

WEB = ObjectKey("apps", "Deployment", "shop", "web")
REPLICAS = FieldChange("spec.replicas", 5, 3, "kube-controller-manager", ("spec", "replicas"))
IMAGE = FieldChange(
    "spec.template.spec.containers[name=app].image",
    "app:2",
    "app:1",
    "kubectl-edit",
    ("spec", "template", "spec", "containers", Item(0, "app"), "image"),
)
PORT = FieldChange(
    "spec.ports[0].port", 81, 80, "kubectl-patch", ("spec", "ports", Item(0), "port")
)
OWNER = FieldChange(
    'metadata.annotations["example.com/owner"]',
    "ops",
    "dev",
    "kubectl-annotate",
    ("metadata", "annotations", "example.com/owner"),
)
TILDE = FieldChange(
    "metadata.annotations.a~b", "x", "y", "kubectl-annotate", ("metadata", "annotations", "a~b")
)


def rules(*written: dict[str, Any]) -> Any:
    return read_rules(list(written), "test")


def decision(change: FieldChange, *written: dict[str, Any], key: ObjectKey = WEB) -> str:
    drift = diff.decided(Drift(key, State.MODIFIED, (change,)), rules(*written))
    decided = (*drift.changes, *drift.accepted, *drift.ignored)
    assert len(decided) == 1
    return f"{decided[0].decision}:{decided[0].rule}"


ACCEPT_HPA = {
    "paths": ["spec.replicas"],
    "managers": ["kube-controller-manager"],
    "action": "accept",
}

CASES: dict[str, tuple[FieldChange, list[dict[str, Any]], str]] = {
    "no rule: heal, decided by none": (REPLICAS, [], "heal:"),
    "ignore": (REPLICAS, [{"paths": ["spec.replicas"], "action": "ignore"}], "ignore:drift[0]"),
    "accept by path and manager": (REPLICAS, [ACCEPT_HPA], "accept:drift[0]"),
    "a person's edit of the same field is healed": (
        FieldChange("spec.replicas", 7, 3, "kubectl-edit", ("spec", "replicas")),
        [ACCEPT_HPA],
        "heal:",
    ),
    "alert": (IMAGE, [{"managers": ["kubectl-*"], "action": "alert"}], "alert:drift[0]"),
    "an explicit heal is named": (IMAGE, [{"name": "images", "action": "heal"}], "heal:images"),
    "a path covers what is inside it": (
        IMAGE,
        [{"paths": ["spec.template"], "action": "ignore"}],
        "ignore:drift[0]",
    ),
    "a path names its own key only": (
        REPLICAS,
        [{"paths": ["spec.selector"], "action": "ignore"}],
        "heal:",
    ),
    "a deeper path does not cover its parent": (
        REPLICAS,
        [{"paths": ["spec.replicas.x"], "action": "ignore"}],
        "heal:",
    ),
    "a named element": (
        IMAGE,
        [{"paths": ["spec.template.spec.containers[name=app].image"], "action": "accept"}],
        "accept:drift[0]",
    ),
    "another named element does not match": (
        IMAGE,
        [{"paths": ["spec.template.spec.containers[name=sidecar]"], "action": "accept"}],
        "heal:",
    ),
    "any element": (
        IMAGE,
        [{"paths": ["spec.template.spec.containers[*].image"], "action": "ignore"}],
        "ignore:drift[0]",
    ),
    "an index": (PORT, [{"paths": ["spec.ports[0]"], "action": "ignore"}], "ignore:drift[0]"),
    "another index": (PORT, [{"paths": ["spec.ports[1]"], "action": "ignore"}], "heal:"),
    "a JSON pointer with an index, as Argo CD and Flux write them": (
        IMAGE,
        [{"paths": ["/spec/template/spec/containers/0/image"], "action": "ignore"}],
        "ignore:drift[0]",
    ),
    "a JSON pointer to another field": (
        REPLICAS,
        [{"paths": ["/spec/selector"], "action": "ignore"}],
        "heal:",
    ),
    "a JSON pointer with any key": (
        OWNER,
        [{"paths": ["/metadata/*/example.com~1owner"], "action": "alert"}],
        "alert:drift[0]",
    ),
    "a JSON pointer with an escaped tilde": (
        TILDE,
        [{"paths": ["/metadata/annotations/a~0b"], "action": "accept"}],
        "accept:drift[0]",
    ),
    "a JSON pointer with an escaped key": (
        OWNER,
        [{"paths": ["/metadata/annotations/example.com~1owner"], "action": "accept"}],
        "accept:drift[0]",
    ),
    "a quoted key, as diff prints it": (
        OWNER,
        [{"paths": ['metadata.annotations["example.com/owner"]'], "action": "accept"}],
        "accept:drift[0]",
    ),
    "another quoted key": (
        OWNER,
        [{"paths": ['metadata.annotations["example.com/other"]'], "action": "accept"}],
        "heal:",
    ),
    "a wildcard key": (OWNER, [{"paths": ["metadata.*"], "action": "alert"}], "alert:drift[0]"),
    "a manager glob that does not match": (
        REPLICAS,
        [{"managers": ["kubectl*"], "action": "ignore"}],
        "heal:",
    ),
    "by kind": (
        REPLICAS,
        [
            {"target": {"kind": "StatefulSet"}, "action": "ignore"},
            {"target": {"group": "apps", "kind": "Deployment"}, "action": "accept"},
        ],
        "accept:drift[1]",
    ),
    "by name and namespace globs": (
        REPLICAS,
        [
            {"target": {"name": "api-*"}, "action": "ignore"},
            {"target": {"namespace": "shop", "name": "w*"}, "action": "alert"},
        ],
        "alert:drift[1]",
    ),
    "by namespace": (
        REPLICAS,
        [{"target": {"namespace": "other"}, "action": "ignore"}],
        "heal:",
    ),
    "the core group is empty, not any": (
        REPLICAS,
        [{"target": {"group": ""}, "action": "ignore"}],
        "heal:",
    ),
    "the first rule that matches decides": (
        REPLICAS,
        [{"action": "alert", "name": "first"}, {"action": "ignore", "name": "second"}],
        "alert:first",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_action_and_matcher_decides_a_field(case: str) -> None:
    change, written, expected = CASES[case]
    assert decision(change, *written) == expected


def test_an_objects_own_rules_come_before_its_sources() -> None:
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": "{action: accept}"}}}
    own = object_rules(body)
    drift = diff.decided(
        Drift(WEB, State.MODIFIED, (REPLICAS,)), (*own, *rules({"action": "alert"}))
    )
    assert [c.rule for c in drift.accepted] == ["gitopsd.io/drift-policy[0]"]


def test_what_is_held_is_no_drift_and_a_write_keeps_it_as_it_is_live() -> None:
    drift = diff.decided(Drift(WEB, State.MODIFIED, (REPLICAS, IMAGE)), rules(ACCEPT_HPA))
    assert drift.reported and drift.heals  # the image still drifts, and is healed
    assert [c.path for c in drift.held] == ["spec.replicas"]

    only_replicas = diff.decided(Drift(WEB, State.MODIFIED, (REPLICAS,)), rules(ACCEPT_HPA))
    assert not only_replicas.reported and not only_replicas.heals

    alerted = diff.decided(Drift(WEB, State.MODIFIED, (IMAGE,)), rules({"action": "alert"}))
    assert alerted.reported and not alerted.heals  # exported, never healed


def test_a_field_another_controller_owns_is_left_out_so_it_keeps_it() -> None:
    manifest = {"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "app"}]}}}}
    live = {"spec": {"replicas": 5}}
    sent = held_as_live(manifest, live, [REPLICAS])
    assert "replicas" not in sent["spec"]
    assert manifest["spec"]["replicas"] == 3  # the manifest itself is not changed


def test_a_field_a_person_or_gitopsd_owns_is_sent_at_its_live_value() -> None:
    manifest = {
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}},
        }
    }
    live = {
        "spec": {
            "replicas": 3,
            "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}},
        }
    }
    sent = held_as_live(manifest, live, [IMAGE])
    assert sent["spec"]["template"]["spec"]["containers"] == [{"name": "app", "image": "app:2"}]


def test_a_field_added_live_is_sent_so_a_takeover_does_not_remove_it() -> None:
    added = FieldChange(
        "metadata.labels.team", "ops", None, "kubectl-label", ("metadata", "labels", "team")
    )
    sent = held_as_live(
        {"metadata": {"name": "web"}}, {"metadata": {"labels": {"team": "ops"}}}, [added]
    )
    assert sent["metadata"] == {"name": "web", "labels": {"team": "ops"}}


def test_a_field_removed_live_is_left_out() -> None:
    removed = FieldChange("data.k", None, "v", "kubectl-edit", ("data", "k"))
    assert held_as_live({"data": {"k": "v", "j": "w"}}, {"data": {"j": "w"}}, [removed]) == {
        "data": {"j": "w"}
    }


def test_a_held_secret_value_is_sent_as_stored_and_its_string_data_dropped() -> None:
    key = FieldChange("data.k", "***", "*** (changed)", "kubectl-edit", ("data", "k"))
    manifest = {"kind": "Secret", "stringData": {"k": "git"}}
    live = {"kind": "Secret", "data": {"k": "bGl2ZQ=="}}
    assert held_as_live(manifest, live, [key]) == {"kind": "Secret", "data": {"k": "bGl2ZQ=="}}


def test_ignored_fields_leave_the_rendered_diff() -> None:
    drift = Drift(
        WEB,
        State.MODIFIED,
        (REPLICAS,),
        live={"spec": {"replicas": 5}},
        desired={"spec": {"replicas": 3}},
    )
    ignored = diff.decided(drift, rules({"paths": ["spec.replicas"], "action": "ignore"}))
    assert ignored.desired == {"spec": {"replicas": 5}}
    assert not ignored.reported


def test_diff_names_a_key_with_dots_so_a_rule_can_be_written_from_it() -> None:
    body = {"metadata": {"annotations": {"example.com/owner": "x"}}}
    path = diff.render_path(body, ("metadata", "annotations", "example.com/owner"))
    assert path == 'metadata.annotations["example.com/owner"]'
    assert decision(OWNER, {"paths": [path], "action": "ignore"}) == "ignore:drift[0]"


PATTERNS = "expected a list of at most 32 non-empty strings"
TARGET_TEXT = "expected a string of at most 253 characters"
INVALID: dict[str, tuple[Any, str]] = {
    "not a list": ({"action": "ignore"}, "expected a list"),
    "a rule that is no mapping": (["ignore"], "test: drift[0]: expected a mapping"),
    "no action": ([{"paths": ["spec.replicas"]}], "test: drift[0]: action: expected one of"),
    "an unknown action": (
        [{"action": "revert"}],
        "test: drift[0]: action: expected one of ignore, accept, heal, alert, got 'revert'",
    ),
    "an unknown field": ([{"action": "heal", "path": "x"}], "drift[0]: unknown field(s) path"),
    "unknown fields": (
        [{"action": "heal", "path": "x", "manager": "y"}],
        "drift[0]: unknown field(s) manager, path",
    ),
    "an unknown target field": (
        [{"action": "heal", "target": {"labels": "x"}}],
        "drift[0]: target: unknown field(s) labels",
    ),
    "unknown target fields": (
        [{"action": "heal", "target": {"labels": "x", "owner": "y"}}],
        "drift[0]: target: unknown field(s) labels, owner",
    ),
    "a target that is no mapping": (
        [{"action": "heal", "target": "web"}],
        "test: drift[0]: target: expected a mapping",
    ),
    "an empty target name": (
        [{"action": "heal", "target": {"name": ""}}],
        f"test: drift[0]: target: name: {TARGET_TEXT}",
    ),
    "a target kind that is no string": (
        [{"action": "heal", "target": {"kind": 5}}],
        f"test: drift[0]: target: kind: {TARGET_TEXT}",
    ),
    "a target name too long": (
        [{"action": "heal", "target": {"name": "n" * 254}}],
        f"test: drift[0]: target: name: {TARGET_TEXT}",
    ),
    "a path that is none": (
        [{"action": "ignore", "paths": ["spec..replicas"]}],
        "test: drift[0]: paths: 'spec..replicas' is not a field path (like spec.replicas, "
        "spec.template.spec.containers[name=app].image, or /spec/replicas)",
    ),
    "paths that are no list": (
        [{"action": "ignore", "paths": "spec.replicas"}],
        f"test: drift[0]: paths: {PATTERNS}",
    ),
    "an empty path": ([{"action": "ignore", "paths": [""]}], f"test: drift[0]: paths: {PATTERNS}"),
    "too many paths": (
        [{"action": "ignore", "paths": ["spec.replicas"] * 33}],
        f"test: drift[0]: paths: {PATTERNS}",
    ),
    "managers not strings": (
        [{"action": "ignore", "managers": [1]}],
        f"test: drift[0]: managers: {PATTERNS}",
    ),
    "a manager glob too long": (
        [{"action": "ignore", "managers": ["m" * 1025]}],
        f"test: drift[0]: managers: {PATTERNS}",
    ),
    "an empty pointer step": ([{"action": "ignore", "paths": ["/spec//x"]}], "not a field path"),
    "an unclosed bracket": ([{"action": "ignore", "paths": ["a[name=x"]}], "not a field path"),
    "paths not strings": ([{"action": "ignore", "paths": [1]}], "paths: expected a list"),
    "a bad rule name": ([{"action": "ignore", "name": "Bad Name"}], "drift[0]: name:"),
    "two rules of one name": (
        [{"action": "ignore", "name": "a"}, {"action": "heal", "name": "a"}],
        "rule names must differ: a",
    ),
    "two names, each twice": (
        [{"action": "heal", "name": name} for name in ("a", "b", "b", "a")],
        "test: drift: rule names must differ: a, b",
    ),
    "too many rules": ([{"action": "heal"}] * 101, "at most 100 rules"),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_an_invalid_rule_is_refused_naming_it(case: str) -> None:
    value, message = INVALID[case]
    with pytest.raises(ConfigError, match=None) as raised:
        read_rules(value, "test")
    assert message in str(raised.value)


def test_rules_at_their_limits_are_read() -> None:
    at_limits = {
        "action": "accept",
        "target": {"name": "n" * 253},
        "paths": ["spec.replicas"] * 32,
        "managers": ["m" * 1024, "*"],
    }
    assert len(read_rules([at_limits, *[{"action": "heal"}] * 99], "test")) == 100


def test_an_objects_own_rules_are_at_most_sixteen() -> None:
    text = "\n".join(["- {action: heal}"] * 17)
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": text}}}
    with pytest.raises(ConfigError, match="expected a list of at most 16 rules"):
        object_rules(body)


def test_an_invalid_annotation_is_refused_with_its_file_and_line() -> None:
    text = (
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n"
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n"
        b"    gitopsd.io/drift-policy: '{target: {kind: X}, action: accept}'\n"
    )
    with pytest.raises(ManifestError) as raised:
        manifests_of("app/web.yaml", parse_file(text, "app/web.yaml", Limits()))
    message = str(raised.value)
    assert message.startswith("app/web.yaml:6: ")
    assert "gitopsd.io/drift-policy[0]: unknown field(s) target" in message


def test_an_annotation_too_large_or_not_yaml_is_refused() -> None:
    for text, message in (("x" * 5000, "at most 4096 bytes"), ("{a: [", "not YAML")):
        body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": text}}}
        with pytest.raises(ConfigError, match=message.replace("[", "\\[")):
            object_rules(body)


NESTED_WITHOUT_END = {
    "flow sequences": "[" * 900 + "]" * 900,
    "block sequences": "- " * 2000 + "x",
    "flow mappings": "{a: " * 800 + "1" + "}" * 800,
}


@pytest.mark.case("BI-21")
@pytest.mark.parametrize("text", NESTED_WITHOUT_END.values(), ids=list(NESTED_WITHOUT_END))
def test_bi21_an_annotation_nested_without_end_is_refused_before_it_is_built(text: str) -> None:
    """Within the 4 KiB an annotation may have, YAML nested a thousand levels deep: read
    whole, it would exhaust the interpreter's stack (a RecursionError, no ConfigError)."""
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": text}}}
    with pytest.raises(ConfigError, match="drift-policy: nested deeper than 3 levels"):
        object_rules(body)


def test_an_annotation_deeper_than_rules_after_a_closed_level_is_refused() -> None:
    """Four levels deep in its second element, after its first closed at three."""
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": "[[[x], [[y]]]]"}}}
    with pytest.raises(ConfigError, match="drift-policy: nested deeper than 3 levels"):
        object_rules(body)


def test_an_annotation_as_deep_as_rules_are_is_read() -> None:
    text = "- {name: r, paths: [spec.replicas], managers: [kubectl-*], action: ignore}"
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": text}}}
    [rule] = object_rules(body)
    assert (rule.label, rule.managers) == ("r", ("kubectl-*",))


def test_an_annotation_that_is_no_string_is_refused() -> None:
    body = {"metadata": {"annotations": {"gitopsd.io/drift-policy": [{"action": "ignore"}]}}}
    with pytest.raises(ConfigError, match="expected YAML text, not list"):
        object_rules(body)
