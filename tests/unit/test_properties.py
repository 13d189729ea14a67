"""Properties, not only examples (hypothesis): the manifest reader turns any bytes into
manifests or one clean error, in bounded memory, and nested aliases expand no further than
its budget (the figures it refuses with are the file's own); the prune planner never
selects an object this source does not provably own and keeps its budget for any
inventory; an edit of a field git declares is drift naming that field, and what others own,
server defaults and a keyed list's order never are. Derandomized: CI runs the same examples
every time, so a failure here is a bug, never luck."""

from __future__ import annotations

import copy
import json
import math
import re
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gitopsd import diff
from gitopsd.config import Limits, PrunePolicy
from gitopsd.errors import ManifestError
from gitopsd.inventory import uid_prefix
from gitopsd.manifests import parse_file
from gitopsd.manifests.identity import manifests_of
from gitopsd.objects import Body, GroupKind, ObjectKey
from gitopsd.plan import DEFINITIONS, PROTECTED, decide_prune
from gitopsd.sync_options import prune_disabled

LIMITS = Limits()
EXAMPLES = settings(
    derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
MEMORY_BOUND = 16 * 2**20
"""Peak bytes allocated reading one generated file of at most 2 KiB."""

# --- the manifest reader ---------------------------------------------------------------

YAML_PIECES = [
    "apiVersion: v1\n",
    "kind: ConfigMap\n",
    "kind: Secret\n",
    "metadata:\n",
    "  name: a\n",
    "  namespace: b\n",
    "data:\n",
    "  k: v\n",
    "---\n",
    "- ",
    "  ",
    "\n",
    ": ",
    "a",
    "&x ",
    "*x",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "'",
    '"',
    "!!python/object ",
    "!!binary ",
    "? ",
    "|\n",
    ">-\n",
    "#",
    "%YAML 1.1\n",
    "\t",
    "\x00",
    "é",
    "\ufeff",
    "0755",
    "yes",
    "null",
    "~",
    "<<: *x\n",
    "items:\n",
    "kind: List\n",
    "generateName: g\n",
    "labels: {a: b}\n",
]
yaml_like = st.lists(st.sampled_from(YAML_PIECES), max_size=60).map("".join)


@st.composite
def nested_aliases(draw: st.DrawFn) -> str:
    """A ConfigMap whose data holds anchors a0, a1, ..., each a list of aliases of the one
    before it and of others earlier: an alias bomb once they multiply past the budget, a
    fine manifest before. Counts are drawn uniformly (small is no likelier)."""
    first = draw(
        st.lists(st.sampled_from(["lol", "1", "{k: v}", "[x, y]"]), min_size=1, max_size=3)
    )
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: a}", "data:"]
    lines.append(f"  a0: &a0 [{', '.join(first)}]")
    for level in range(1, draw(st.sampled_from(range(7, 1, -1)))):
        anchors = [level - 1] * draw(st.sampled_from(range(6, 0, -1)))
        anchors += draw(st.lists(st.integers(0, level - 1), max_size=2))
        lines.append(f"  a{level}: &a{level} [{', '.join(f'*a{a}' for a in anchors)}]")
    return "\n".join(lines) + "\n"


files = st.one_of(
    st.binary(max_size=2048), yaml_like.map(str.encode), nested_aliases().map(str.encode)
)
EXPANSION_FLOOR = 10_000
"""Aliases that expand a document to fewer nodes are always allowed, whatever the ratio."""
EXPANDED = re.compile(r"aliases expand (\d+) written nodes to (\d+), over (\d+) times as many")


@EXAMPLES
@given(data=files)
@example(data=b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: List\n")
@example(data=b"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n")
@pytest.mark.case("BI-08")
def test_any_file_reads_as_manifests_or_one_clean_error_in_bounded_memory(data: bytes) -> None:
    refused = None
    tracemalloc.start()
    try:
        manifests = manifests_of("x.yaml", parse_file(data, "x.yaml", LIMITS))
    except ManifestError as error:
        assert str(error).startswith("x.yaml"), error  # it names the file
        manifests, refused = [], error
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
    for manifest in manifests:
        assert manifest.key.name and manifest.body["kind"] == manifest.key.kind
    said = EXPANDED.search(str(refused)) if refused else None
    if said is not None:
        assert_refused_for_its_expansion(data, *map(int, said.groups()))
    elif refused is None:
        assert_expanded_within_the_budget(data)


def assert_refused_for_its_expansion(data: bytes, written: int, expanded: int, times: int) -> None:
    """The reader's figures are the file's own, and over the budget configured."""
    assert times == LIMITS.max_expansion
    assert expanded > max(times * written, EXPANSION_FLOOR)
    assert (written, expanded) in expansions(data.decode("utf-8-sig"))


def assert_expanded_within_the_budget(data: bytes) -> None:
    for written, expanded in expansions(data.decode("utf-8-sig")):
        assert expanded <= max(LIMITS.max_expansion * written, EXPANSION_FLOOR)


def expansions(text: str) -> Iterator[tuple[int, int]]:
    """Each document's nodes as written and with its aliases expanded, counted on the graph
    PyYAML composes, where an alias is the very node it names: nothing is expanded."""
    for root in yaml.compose_all(text, Loader=yaml.CSafeLoader):
        sizes: dict[int, int] = {}
        expanded = _expanded(root, sizes)
        yield len(sizes), expanded


def _expanded(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The node's size with aliases expanded; `sizes` remembers each node written once."""
    if id(node) not in sizes:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        sizes[id(node)] = 1 + sum(_expanded(child, sizes) for child in children)
    return sizes[id(node)]


# --- the prune planner ------------------------------------------------------------------

KINDS = [
    GroupKind("", "ConfigMap"),
    GroupKind("apps", "Deployment"),
    *sorted(PROTECTED),
]
keys = st.builds(
    lambda kind, namespace, name: ObjectKey(kind.group, kind.kind, namespace, name),
    st.sampled_from(KINDS),
    st.sampled_from(["", "ns"]),
    st.sampled_from([f"o{i}" for i in range(12)]),
)
uids = st.sampled_from(["1111-aaaa", "2222-bbbb", "3333-cccc"])


def live_object(uid: str, annotation: str | None, wave: str | None) -> dict[str, Any]:
    annotations = {
        **({"gitopsd.io/prune": annotation} if annotation else {}),
        **({"gitopsd.io/sync-wave": wave} if wave else {}),
    }
    return {"metadata": {"uid": uid, "annotations": annotations}}


labelled_objects = st.dictionaries(
    keys,
    st.builds(live_object, uids, st.sampled_from([None, "disabled"]), st.sampled_from([None, "2"])),
    max_size=12,
)
policies = st.builds(
    PrunePolicy,
    enabled=st.just(True),
    allow_empty=st.booleans(),
    allow_mass_prune=st.booleans(),
    budget_percent=st.sampled_from([0.0, 10.0, 25.0, 50.0, 100.0]),
    prune_protected=st.booleans(),
)


@st.composite
def inventories(draw: st.DrawFn) -> tuple[dict[ObjectKey, Any], dict[ObjectKey, str]]:
    """Labelled live objects and a record: mostly what this source applied (its uids),
    with copied labels, recreated objects and records of objects gone mixed in."""
    labelled = draw(labelled_objects)
    recorded = {
        key: uid_prefix(live) for key, live in labelled.items() if draw(st.integers(0, 9)) > 1
    }
    others = st.dictionaries(keys, uids.map(lambda uid: uid_prefix({"metadata": {"uid": uid}})))
    return labelled, {**draw(others), **recorded}


@settings(EXAMPLES, max_examples=500)
@given(
    inventory=inventories(),
    desired=st.sets(keys, max_size=8),
    policy=policies,
    unserved=st.sets(st.sampled_from(KINDS), max_size=2),
    held_back=st.sets(st.sampled_from(KINDS), max_size=2),
)
def test_prune_deletes_only_what_it_owns_and_keeps_its_budget(
    inventory: tuple[dict[ObjectKey, dict[str, Any]], dict[ObjectKey, str]],
    desired: set[ObjectKey],
    policy: PrunePolicy,
    unserved: set[GroupKind],
    held_back: set[GroupKind],
) -> None:
    labelled, recorded = inventory
    decision = decide_prune(desired, labelled, recorded, policy, unserved, held_back)

    owned = {k for k, live in labelled.items() if recorded.get(k) == uid_prefix(live)}
    for key in decision.delete:
        assert key in owned and key not in desired, key  # recorded, with the uid it has now
        assert key.group_kind not in unserved | held_back
        assert not prune_disabled(labelled[key])
        assert policy.prune_protected or key.group_kind not in PROTECTED
    owned_visible = {k for k in owned if k.group_kind not in unserved}
    budget = max(1, math.floor(len(owned_visible) * policy.budget_percent / 100))
    assert policy.allow_mass_prune or len(decision.delete) <= budget
    assert desired or policy.allow_empty or not decision.delete
    refused = {key for key, _ in decision.refused}
    assert not refused & set(decision.delete)
    assert len(set(decision.delete)) == len(decision.delete)
    gone_from_git = (set(labelled) | {k for k in recorded if k.group_kind in unserved}) - desired
    assert set(decision.delete) | refused == gone_from_git  # each one decided, with its rule
    definitions_last = [key.group_kind in DEFINITIONS for key in decision.delete]
    assert definitions_last == sorted(definitions_last)


# --- drift ------------------------------------------------------------------------------

KEYS = st.text(alphabet="abcdefgh", min_size=1, max_size=4)
"""Plain field names (no dot, no bracket), none of the names the examples add or default."""
scalars = st.one_of(st.booleans(), st.integers(-9, 9), st.text(alphabet="xyz", max_size=3))
words = st.lists(st.text(alphabet="xyz", min_size=1, max_size=3), min_size=1, max_size=4)
"""An atomic list (a command's args): its order is part of its value."""
ITEM_NAMES = ["n0", "n1", "n2", "n3", "n4"]
KEY = ObjectKey("example.com", "Widget", "ns", "a")
Place = tuple[str | int, ...]


def named_items(min_size: int = 1) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A list keyed by name (containers, env): the server keeps it in its own order."""
    names = st.lists(st.sampled_from(ITEM_NAMES), min_size=min_size, max_size=4, unique=True)
    return names.flatmap(
        lambda chosen: st.lists(scalars, min_size=len(chosen), max_size=len(chosen)).map(
            lambda values: [{"name": n, "v": v} for n, v in zip(chosen, values, strict=True)]
        )
    )


def _maps(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(
        KEYS, st.one_of(scalars, words, named_items(), children), min_size=1, max_size=3
    )


specs = st.builds(
    lambda generated, args, items: {**generated, "args": args, "items": items},
    st.recursive(_maps(st.nothing()), _maps, max_leaves=6),
    st.lists(st.text(alphabet="xyz", min_size=1, max_size=3), min_size=2, max_size=4, unique=True),
    named_items(min_size=2),
)
"""git's spec: any shape, with an atomic list and a keyed list of two items at least."""


@dataclass(frozen=True)
class Field:
    """A place in git's manifest, and the name the diff gives it: `spec.b.items[name=n1].v`."""

    place: Place
    shown: str
    value: Any


def fields_of(value: Any, place: Place = ("spec",), shown: str = "spec") -> Iterator[Field]:
    yield Field(place, shown, value)
    if isinstance(value, dict):
        for key, child in value.items():
            if key != "name":  # a keyed item's name is its identity, not a field to edit
                yield from fields_of(child, (*place, key), f"{shown}.{key}")
    elif isinstance(value, list) and all(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            yield from fields_of(item, (*place, index), f"{shown}[name={item['name']}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield Field((*place, index), f"{shown}[{index}]", item)


def owned(value: Any) -> dict[str, Any]:
    """The fieldsV1 of an apply that declares `value`: maps by field, keyed lists by key,
    atomic lists and scalars whole."""
    if isinstance(value, dict):
        return {f"f:{key}": owned(child) for key, child in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return {_item_key(item): {".": {}, **owned(item)} for item in value}
    return {}


def owning(body: Body, place: Place) -> dict[str, Any]:
    """The fieldsV1 of a manager that wrote the one field at `place` of `body`."""
    trie: dict[str, Any] = {}
    node: Any = body
    nested = trie
    for segment in place:
        if isinstance(segment, int) and not isinstance(node[segment], dict):
            break  # an atomic list is owned whole
        raw = _item_key(node[segment]) if isinstance(segment, int) else f"f:{segment}"
        nested[raw] = {}
        nested, node = nested[raw], node[segment]
    return trie


def _item_key(item: dict[str, Any]) -> str:
    return "k:" + json.dumps({"name": item["name"]}, separators=(",", ":"))


def at(body: Body, place: Place) -> Any:
    node: Any = body
    for segment in place:
        node = node[segment]
    return node


def defaulted(value: Any) -> Any:
    """`value` as the server stores it: each map of git's spec gains a defaulted field."""
    if isinstance(value, dict):
        return {**{key: defaulted(child) for key, child in value.items()}, "policy": "Always"}
    if isinstance(value, list):
        return [defaulted(item) for item in value]
    return value


@dataclass(frozen=True)
class Cluster:
    """git's manifest, the server-side-apply dry-run result for it (server defaults
    included), and the object live, each a copy of its own, for an example to edit."""

    declared: Body
    expected: Body
    live: Body

    def written_by(self, manager: str, place: Place, both: bool = False) -> None:
        """Records that `manager` wrote the field at `place` live (and, `both`, in the
        dry-run result: server-side apply keeps the fields of others)."""
        entry = {"manager": manager, "operation": "Update", "fieldsV1": owning(self.live, place)}
        for body in (self.live, self.expected) if both else (self.live,):
            body["metadata"]["managedFields"].append(copy.deepcopy(entry))

    def drift(self) -> diff.Drift | None:
        return diff.compare(KEY, self.expected, self.live, self.declared)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """An object as gitopsd applied it: live equals the dry-run result but for what the
    server owns (its version, status) and the fields it defaults."""
    metadata = {"name": "a", "namespace": "ns"}
    declared = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": metadata,
        "spec": draw(specs),
    }
    ours = {"manager": "gitopsd", "operation": "Apply", "fieldsV1": owned(declared)}
    expected = {
        **declared,
        "metadata": {**metadata, "uid": "u", "resourceVersion": "7", "managedFields": [ours]},
        "spec": defaulted(declared["spec"]),
        "status": {"ready": True},
    }
    live = copy.deepcopy(expected)
    live["metadata"]["resourceVersion"], live["status"] = "9", {"ready": False}
    return Cluster(copy.deepcopy(declared), copy.deepcopy(expected), live)


@dataclass(frozen=True)
class Found:
    """What the drift of an edit must name: fields under `field`, and only those; with
    `exactly`, the one field, as (path, live, desired, manager)."""

    field: str
    exactly: tuple[str, Any, Any, str] | None = None


def fields_holding(world: Cluster, *types: type) -> list[Field]:
    """The fields of git's spec whose values are of `types`."""
    return [f for f in fields_of(world.declared["spec"]) if isinstance(f.value, types)]


def changed(value: Any) -> Any:
    """Another value of the same type (1 and True are equal in Python, so types stay)."""
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int) else f"{value}x"


def a_changed_scalar(data: st.DataObject, world: Cluster) -> Found:
    field = data.draw(st.sampled_from(fields_holding(world, bool, int, str)))
    new = changed(field.value)
    at(world.live, field.place[:-1])[field.place[-1]] = new
    world.written_by("kubectl-edit", field.place)
    return Found(field.shown, (field.shown, new, field.value, "kubectl-edit"))


def a_key_added_by_a_person(data: st.DataObject, world: Cluster) -> Found:
    """kubectl edit adds a field git does not declare: the dry-run result keeps it too."""
    field = data.draw(st.sampled_from(fields_holding(world, dict)))
    for body in (world.live, world.expected):
        at(body, field.place)["zz"] = "added"
    world.written_by("kubectl-edit", (*field.place, "zz"), both=True)
    shown = f"{field.shown}.zz"
    return Found(shown, (shown, "added", None, "kubectl-edit"))


def a_removed_list_item(data: st.DataObject, world: Cluster) -> Found:
    field = data.draw(st.sampled_from(fields_holding(world, list)))
    del at(world.live, field.place)[data.draw(st.integers(0, len(field.value) - 1))]
    return Found(f"{field.shown}[")


def a_reordered_atomic_list(data: st.DataObject, world: Cluster) -> Found:
    args = at(world.live, ("spec", "args"))
    args.append(args.pop(0))  # its items differ: moved, it is another value
    return Found("spec.args[")


FOUND = [a_changed_scalar, a_key_added_by_a_person, a_removed_list_item, a_reordered_atomic_list]


@EXAMPLES
@given(world=clusters(), edit=st.sampled_from(FOUND), data=st.data())
def test_an_edit_of_what_git_declares_is_drift_naming_the_field(
    world: Cluster, edit: Callable[[st.DataObject, Cluster], Found], data: st.DataObject
) -> None:
    found = edit(data, world)

    drift = world.drift()

    assert drift is not None, f"{edit.__name__} was not found"
    paths = [change.path for change in drift.changes]
    assert paths and all(path.startswith(found.field) for path in paths), paths  # no default
    if found.exactly is not None:
        assert [(c.path, c.live, c.desired, c.manager) for c in drift.changes] == [found.exactly]


def a_field_a_controller_added(data: st.DataObject, world: Cluster) -> None:
    field = data.draw(st.sampled_from(fields_holding(world, dict)))
    for body in (world.live, world.expected):
        at(body, field.place)["zz"] = "scaled"
    world.written_by("kube-controller-manager", (*field.place, "zz"), both=True)


def a_keyed_list_in_the_servers_order(data: st.DataObject, world: Cluster) -> None:
    keyed = [
        f for f in fields_holding(world, list) if len(f.value) > 1 and isinstance(f.value[0], dict)
    ]
    items = at(world.live, data.draw(st.sampled_from(keyed)).place)
    items.append(items.pop(0))


def nothing_but_the_servers_own_fields(data: st.DataObject, world: Cluster) -> None:
    """Defaults, the object's version and its status differ from git's manifest only."""


NOT_DRIFT = [
    a_field_a_controller_added,
    a_keyed_list_in_the_servers_order,
    nothing_but_the_servers_own_fields,
]


@EXAMPLES
@given(world=clusters(), edit=st.sampled_from(NOT_DRIFT), data=st.data())
def test_what_others_own_defaults_and_a_keyed_lists_order_are_never_drift(
    world: Cluster, edit: Callable[[st.DataObject, Cluster], None], data: st.DataObject
) -> None:
    edit(data, world)

    assert world.drift() is None
