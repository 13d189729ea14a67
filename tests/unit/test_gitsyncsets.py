"""GitSyncSets' pure parts, as tables: the generated CRD, a set read, its generators'
elements, each element's GitSync from the template, the deletion guards, and its status."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsd.configfile import GitSyncSettings
from gitopsd.configfile.clusters import DeclaredCluster
from gitopsd.errors import ConfigError
from gitopsd.gitsync.spec import read as read_gitsync
from gitopsd.gitsyncsets import MAX_ELEMENTS, MAX_TEMPLATE_BYTES, SET_LABEL, schema
from gitopsd.gitsyncsets.deletion import decide
from gitopsd.gitsyncsets.generators import Element, elements, glob_matches, matching
from gitopsd.gitsyncsets.spec import Directory, Guards, read
from gitopsd.gitsyncsets.status import Outcome, events, status_of
from gitopsd.gitsyncsets.template import generated, gitsync_of, owned_by
from gitopsd.plan import Refusal
from gitopsd.settings_table import REF

CRD_FILE = Path(__file__).resolve().parents[2] / "config" / "crd" / "gitsyncsets.yaml"
URL = "https://git.example.com/team/apps.git"
UID = "0b6c3c0e-set"
LISTED = {"list": {"elements": [{"env": "dev"}, {"env": "prod"}]}}
GIT = {"git": {"repository": {"url": URL}, "directories": [{"path": "apps/*"}]}}
TEMPLATE = {
    "metadata": {"name": "app-${env}"},
    "spec": {"repository": {"url": URL}, "paths": ["base"]},
}


def a_set(*generators: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gitopsd.io/v1alpha1",
        "kind": "GitSyncSet",
        "metadata": {"name": "apps", "namespace": "team", "uid": UID, "generation": 3},
        "spec": {"generators": list(generators), "template": TEMPLATE, **spec},
    }


def test_the_crd_file_is_what_the_schema_module_prints() -> None:
    assert CRD_FILE.read_text() == schema.crd_yaml(), (
        f"{CRD_FILE} is stale: run `make crd` to regenerate it from gitopsd/gitsyncsets/schema.py"
    )


def empty_maps(node: Any, path: str = "") -> list[str]:
    """Where a schema holds an empty `properties`: the API server stores none, so applying
    the shipped file over a CRD another manager wrote conflicts on the whole version."""
    if isinstance(node, list):
        return [found for n, item in enumerate(node) for found in empty_maps(item, f"{path}[{n}]")]
    if not isinstance(node, dict):
        return []
    here = [f"{path}.properties"] if node.get("properties") == {} else []
    return here + [found for k, v in node.items() for found in empty_maps(v, f"{path}.{k}")]


@pytest.mark.parametrize("crd", ["gitsyncs.yaml", "gitsyncsets.yaml"])
def test_no_schema_of_a_shipped_crd_has_an_empty_properties(crd: str) -> None:
    document = yaml.safe_load((CRD_FILE.parent / crd).read_text())

    assert empty_maps(document) == []


# --- a set read -------------------------------------------------------------------------

TOO_BIG = {"metadata": {"name": "x"}, "spec": {"paths": ["p" * MAX_TEMPLATE_BYTES]}}
INVALID_SETS = {
    "no generator": (a_set(), "spec: generators: at least one generator is required"),
    "two kinds in one generator": (
        a_set({**LISTED, **GIT}),
        "generators[0]: exactly one of list, git, clusters, matrix",
    ),
    "a matrix of one": (
        a_set({"matrix": {"generators": [LISTED]}}),
        "generators[0].matrix.generators: exactly two generators are required",
    ),
    "a matrix in a matrix": (
        a_set({"matrix": {"generators": [LISTED, {"matrix": {"generators": [GIT, GIT]}}]}}),
        "generators[0].matrix.generators[1]: a matrix inside a matrix is not supported",
    ),
    "a variable name with a dash": (
        a_set({"list": {"elements": [{"my-env": "dev"}]}}),
        "generators[0].list.elements[0]: 'my-env' is not a variable name",
    ),
    "a value not a string": (
        a_set({"list": {"elements": [{"replicas": 3}]}}),
        "generators[0].list.elements[0]: replicas: a variable's value is a string",
    ),
    "a git generator of an OCI artifact": (
        a_set({"git": {**GIT["git"], "repository": {"url": "oci://r.example.com/a"}}}),
        "generators[0].git.repository.url: a git repository's, not an OCI artifact's",
    ),
    "only exclusions": (
        a_set({"git": {**GIT["git"], "directories": [{"path": "apps/*", "exclude": True}]}}),
        "generators[0].git.directories: at least one path not excluded is required",
    ),
    "a template without a name": (
        a_set(LISTED, template={"metadata": {}, "spec": {}}),
        "template: metadata.name is required",
    ),
    "a template too big": (a_set(LISTED, template=TOO_BIG), "over the most a template may be"),
    "an interval of no time": (a_set(LISTED, interval="0s"), "interval: '0s' is not a duration"),
}


@pytest.mark.parametrize("case", INVALID_SETS, ids=list(INVALID_SETS))
def test_an_invalid_set_is_refused_naming_the_set_and_field(case: str) -> None:
    body, message = INVALID_SETS[case]
    with pytest.raises(ConfigError) as raised:
        read(body)
    assert "GitSyncSet team/apps: spec" in str(raised.value)
    assert message in str(raised.value)


def test_a_set_takes_the_defaults_of_a_gitsync_and_the_prune_guards() -> None:
    gitsyncset = read(a_set(LISTED))
    assert gitsyncset.interval_seconds == 60.0
    assert gitsyncset.guards == Guards(allow_empty=False, budget_percent=25.0)
    assert (gitsyncset.key, gitsyncset.uid) == ("team/apps", UID)


# --- generators -------------------------------------------------------------------------

GLOBS = {
    "one level": ("apps/a", "apps/*", True),
    "not two levels": ("apps/a/b", "apps/*", False),
    "** spans levels": ("apps/a/b", "apps/**", True),
    "** in the middle": ("envs/prod/eu/app", "envs/**/app", True),
    "** may match no name": ("envs/app", "envs/**/app", True),
    "not a prefix": ("apps2/a", "apps/*", False),
    "* never crosses /": ("apps/a", "*", False),
    "* skips a hidden name": ("apps/.git", "apps/*", False),
    "a hidden name named": ("apps/.hidden", "apps/.*", True),
    "a character class": ("apps/b", "apps/[ab]", True),
    "case counts": ("Apps/a", "apps/*", False),
    "many ** stay cheap": ("a/" * 200 + "z", "**/" * 100 + "y", False),
}


@pytest.mark.parametrize("case", GLOBS, ids=list(GLOBS))
def test_a_directory_glob(case: str) -> None:
    path, glob, matches = GLOBS[case]
    assert glob_matches(path, glob) is matches


def test_an_exclusion_wins_wherever_it_is_listed() -> None:
    found = ["apps", "apps/a", "apps/b", "apps/b/x", "apps/skip", "other/c"]
    globs = (Directory("apps/skip", exclude=True), Directory("apps/*"), Directory("other/*"))
    assert matching(found, globs) == ["apps/a", "apps/b", "other/c"]


LISTINGS = {(URL, REF.default): ["apps", "apps/a", "apps/b", "docs"]}
CLUSTERS = (
    DeclaredCluster("prod", Path("prod.kubeconfig"), namespaces=("team",)),
    DeclaredCluster("staging", Path("staging.kubeconfig"), namespaces=("*",)),
    DeclaredCluster("other", Path("other.kubeconfig"), namespaces=("elsewhere",)),
    DeclaredCluster("admins", Path("admins.kubeconfig")),
)
ELEMENTS: dict[str, tuple[list[dict[str, Any]], list[dict[str, str]]]] = {
    "a list, as written": ([LISTED], [{"env": "dev"}, {"env": "prod"}]),
    "a directory each, with path and basename": (
        [GIT],
        [{"path": "apps/a", "basename": "a"}, {"path": "apps/b", "basename": "b"}],
    ),
    "the clusters the namespace may target": (
        [{"clusters": {}}],
        [{"cluster": "prod"}, {"cluster": "staging"}],
    ),
    "a matrix: every pair, variables merged": (
        [{"matrix": {"generators": [LISTED, GIT]}}],
        [
            {"env": "dev", "path": "apps/a", "basename": "a"},
            {"env": "dev", "path": "apps/b", "basename": "b"},
            {"env": "prod", "path": "apps/a", "basename": "a"},
            {"env": "prod", "path": "apps/b", "basename": "b"},
        ],
    ),
    "generators one after the other": (
        [{"clusters": {}}, LISTED],
        [{"cluster": "prod"}, {"cluster": "staging"}, {"env": "dev"}, {"env": "prod"}],
    ),
}


@pytest.mark.parametrize("case", ELEMENTS, ids=list(ELEMENTS))
def test_the_elements_of_a_generator(case: str) -> None:
    generators, values = ELEMENTS[case]
    found = elements(read(a_set(*generators)), LISTINGS, CLUSTERS)
    assert [dict(element.values) for element in found] == values


def test_a_variable_both_halves_of_a_matrix_give_is_an_error() -> None:
    twice = {"list": {"elements": [{"env": "qa"}]}}
    with pytest.raises(ConfigError, match=r"both generators give the variable env"):
        elements(read(a_set({"matrix": {"generators": [LISTED, twice]}})), {})


TOO_MANY: dict[str, list[dict[str, Any]]] = {
    "a matrix past the bound": [
        {
            "matrix": {
                "generators": [
                    {"list": {"elements": [{"a": str(n)} for n in range(40)]}},
                    {"list": {"elements": [{"b": str(n)} for n in range(30)]}},
                ]
            }
        }
    ],
    "generators that add up past it": [
        {"list": {"elements": [{"a": str(n)} for n in range(MAX_ELEMENTS)]}},
        LISTED,
    ],
}


@pytest.mark.parametrize("case", TOO_MANY, ids=list(TOO_MANY))
def test_too_many_elements_are_refused(case: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"over the most a GitSyncSet may generate, {MAX_ELEMENTS}"
    ):
        elements(read(a_set(*TOO_MANY[case])), {})


# --- the template -----------------------------------------------------------------------


def element(**values: str) -> Element:
    return Element(values, f"generators[0].list {values}")


def gitsync(template: dict[str, Any], **values: str) -> dict[str, Any]:
    return gitsync_of(read(a_set(LISTED, template=template)), element(**values))


def test_an_elements_gitsync_is_the_template_expanded_and_owned_by_the_set() -> None:
    template = {
        "metadata": {"name": "${basename}-${env:=dev}", "labels": {"team": "${env}"}},
        "spec": {
            "repository": {"url": URL},
            "paths": ["${path}", "literal-$${path}"],
            "postBuild": {"substitute": {"env": "from-template", "region": "eu"}},
        },
    }
    body = gitsync(template, path="apps/web", basename="web", env="prod")
    assert body["metadata"] == {
        "name": "web-prod",
        "namespace": "team",
        "labels": {"team": "prod", SET_LABEL: "apps"},
        "annotations": {},
        "ownerReferences": [
            {
                "apiVersion": "gitopsd.io/v1alpha1",
                "kind": "GitSyncSet",
                "name": "apps",
                "uid": UID,
                "controller": True,
            }
        ],
    }
    assert body["spec"]["paths"] == ["apps/web", "literal-${path}"]
    assert body["spec"]["postBuild"]["substitute"] == {
        "path": "apps/web",
        "basename": "web",
        "env": "from-template",  # the template's own entry wins
        "region": "eu",
    }
    assert owned_by(body, UID) and not owned_by(body, "another-uid")
    read_gitsync(body, GitSyncSettings())  # a GitSync the controller can serve


INVALID_TEMPLATES: dict[str, tuple[dict[str, Any], str]] = {
    "a variable with no value": (
        {"metadata": {"name": "app"}, "spec": {"paths": ["${missing}"]}},
        "template.spec.paths[0]: variable missing has no value",
    ),
    "a name that is not a name": (
        {"metadata": {"name": "App_${env}"}, "spec": {}},
        "template.metadata.name: 'App_dev'",
    ),
    "a name too long": (
        {"metadata": {"name": "a" * 48 + "${env}"}, "spec": {}},
        "is over 50 characters",
    ),
    "another namespace": (
        {"metadata": {"name": "app", "namespace": "${env}"}, "spec": {}},
        "template.metadata.namespace: 'dev': a GitSyncSet generates GitSyncs into its own "
        "namespace (team) only",
    ),
}


@pytest.mark.parametrize("case", INVALID_TEMPLATES, ids=list(INVALID_TEMPLATES))
def test_a_template_an_element_cannot_fill_names_the_set_element_and_field(case: str) -> None:
    template, message = INVALID_TEMPLATES[case]
    with pytest.raises(ConfigError) as raised:
        gitsync(template, env="dev")
    said = str(raised.value)
    assert said.startswith("GitSyncSet team/apps: element generators[0].list {'env': 'dev'}")
    assert message in said and "nothing was applied or deleted" in said


def test_two_elements_of_one_name_are_an_error() -> None:
    gitsyncset = read(a_set(LISTED, template={"metadata": {"name": "same"}, "spec": {}}))
    with pytest.raises(ConfigError, match=r"same is also the name of generators\[0\]"):
        generated(gitsyncset, [element(env="dev"), element(env="prod")])


def test_every_element_gets_its_gitsync() -> None:
    gitsyncset = read(a_set(LISTED))
    made = generated(gitsyncset, elements(gitsyncset, {}))
    assert sorted(made) == ["app-dev", "app-prod"]


# --- deletion guards --------------------------------------------------------------------


def live(name: str, uid: str = UID) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": [{"uid": uid, "controller": True}]}}


def owned(*names: str) -> dict[str, dict[str, Any]]:
    return {name: live(name) for name in names}


FOUR = owned("a", "b", "c", "d")
DELETIONS = {
    "new ones only": (["a", "b"], {}, Guards(), ("a", "b"), (), (), None),
    "one of four is within the budget": (
        ["a", "b", "c"],
        FOUR,
        Guards(),
        ("a", "b", "c"),
        ("d",),
        (),
        None,
    ),
    "one is always allowed": (["a"], owned("a", "b"), Guards(), ("a",), ("b",), (), None),
    "two of four exceed 25%": (["a", "b"], FOUR, Guards(), (), ("c", "d"), (), Refusal.THRESHOLD),
    "a larger budget": (
        ["a", "b"],
        FOUR,
        Guards(budget_percent=50),
        ("a", "b"),
        ("c", "d"),
        (),
        None,
    ),
    "mass deletion allowed": (
        ["a"],
        FOUR,
        Guards(allow_mass_deletion=True),
        ("a",),
        ("b", "c", "d"),
        (),
        None,
    ),
    "no element at all": ([], owned("a"), Guards(), (), ("a",), (), Refusal.EMPTY_SOURCE),
    "no element, allowed": ([], owned("a"), Guards(allow_empty=True), (), ("a",), (), None),
    "a name another holds is never taken": (
        ["a", "b"],
        {"a": live("a"), "b": live("b", "another-set"), "c": {"metadata": {"name": "c"}}},
        Guards(),
        ("a",),
        (),
        ("b",),
        None,
    ),
    "what the set does not own is never deleted": (
        ["a"],
        {"a": live("a"), "x": live("x", "another-set"), "y": {"metadata": {"name": "y"}}},
        Guards(),
        ("a",),
        (),
        (),
        None,
    ),
}


@pytest.mark.parametrize("case", DELETIONS, ids=list(DELETIONS))
def test_deletion_guards(case: str) -> None:
    wanted, existing, guards, apply, delete, taken, refused = DELETIONS[case]
    decision = decide(UID, {name: {} for name in wanted}, existing, guards)
    assert (decision.apply, decision.delete, decision.taken) == (apply, delete, taken)
    assert decision.refused == refused


def test_a_refused_deletion_says_which_guard_its_numbers_and_the_override() -> None:
    decision = decide(UID, {"a": {}}, FOUR, Guards())
    assert decision.refusal_message == (
        "3 of the 4 GitSyncs this set owns would be deleted (b, c, d), over the budget of 1; "
        "nothing was deleted or applied (guard: threshold; spec.guards.allowMassDeletion: "
        "true, or a larger spec.guards.deletionBudgetPercent, allows it)"
    )
    empty = decide(UID, {}, owned("a", "b"), Guards())
    assert "guard: empty_source; spec.guards.allowEmpty: true allows it" in empty.refusal_message


# --- status -----------------------------------------------------------------------------


def test_the_status_and_its_events() -> None:
    generated_ = Outcome("Generated", "2 GitSyncs generated", ("b", "a"), created=("a", "b"))
    first = status_of(3, generated_, None)
    assert first["observedGeneration"] == 3 and first["gitSyncs"] == ["a", "b"]
    assert first["total"] == 2
    [ready] = first["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Generated")
    said = [(e.reason, e.message, e.type) for e in events(None, first, generated_)]
    assert said == [
        ("GitSyncsChanged", "created a, b", "Normal"),
        ("Generated", "2 GitSyncs generated", "Normal"),
    ]
    again = status_of(3, Outcome("Generated", "2 GitSyncs generated", ("a", "b")), first)
    assert again == first and events(first, again, Outcome("Generated", "", ())) == []
    blocked = Outcome("DeletionBlocked", "3 of the 4 ...", ("a", "b"))
    refused = status_of(4, blocked, copy.deepcopy(first))
    assert refused["conditions"][0]["status"] == "False"
    assert [e.type for e in events(first, refused, blocked)] == ["Warning"]
