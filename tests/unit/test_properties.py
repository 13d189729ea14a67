"""Properties, not only examples (hypothesis): the manifest reader turns any bytes into
manifests or one clean error, in bounded memory; the prune planner never selects an object
this source does not provably own and keeps its budget for any inventory; drift measured
between a dry-run result and itself is never drift. Derandomized: CI runs the same
examples every time, so a failure here is a bug, never luck."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gitopsd import diff
from gitopsd.config import Limits, PrunePolicy
from gitopsd.errors import ManifestError
from gitopsd.inventory import uid_prefix
from gitopsd.manifests import parse_file
from gitopsd.manifests.identity import manifests_of
from gitopsd.objects import GroupKind, ObjectKey
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
files = st.one_of(st.binary(max_size=2048), yaml_like.map(str.encode))


@EXAMPLES
@given(data=files)
@example(data=b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: List\n")
@example(data=b"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n")
def test_any_file_reads_as_manifests_or_one_clean_error_in_bounded_memory(data: bytes) -> None:
    tracemalloc.start()
    try:
        manifests = manifests_of("x.yaml", parse_file(data, "x.yaml", LIMITS))
    except ManifestError as error:
        assert str(error).startswith("x.yaml"), error  # it names the file
        manifests = []
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
    for manifest in manifests:
        assert manifest.key.name and manifest.body["kind"] == manifest.key.kind


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

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
managed_entries = st.lists(
    st.fixed_dictionaries(
        {
            "manager": st.sampled_from(["gitopsd", "kubectl-edit", "kube-controller-manager"]),
            "operation": st.sampled_from(["Apply", "Update"]),
            "fieldsV1": st.dictionaries(
                st.sampled_from(["f:data", "f:spec", "f:metadata"]),
                st.dictionaries(st.sampled_from(["f:k", "f:replicas", "."]), st.just({})),
            ),
        }
    ),
    max_size=3,
)
objects = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.sampled_from(["ConfigMap", "Secret", "Thing"]),
        "metadata": st.fixed_dictionaries(
            {"name": st.just("a"), "resourceVersion": st.text(max_size=4)},
            optional={
                "annotations": st.dictionaries(st.text(max_size=6), st.text(max_size=6)),
                "managedFields": managed_entries,
                "labels": st.dictionaries(st.text(max_size=6), st.text(max_size=6)),
            },
        ),
    },
    optional={
        "data": st.dictionaries(st.text(max_size=6), st.text(max_size=8)),
        "spec": json_values,
        "status": json_values,
    },
)
KEY = ObjectKey("", "ConfigMap", "ns", "a")


@EXAMPLES
@given(body=objects, declared=objects)
def test_a_dry_run_result_compared_with_itself_is_never_drift(
    body: dict[str, Any], declared: dict[str, Any]
) -> None:
    assert diff.compare(KEY, body, body, body) is None
    assert diff.compare(KEY, body, body, declared, takeover=()) is None
    once = diff.normalize(body)
    assert diff.normalize(once) == once
