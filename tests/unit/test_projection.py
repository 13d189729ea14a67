"""The projection the watch cache keeps: it drops only what drift normalizes away, and
shares equal managedFields tries between objects. On objects from the real API server:
tests/integration/test_cluster_reads.py."""

from __future__ import annotations

import copy
import json

from gitopsd import diff, health
from gitopsd.cluster.projection import DROPPED_METADATA, LAST_APPLIED, SHARED_TRIES, Projection
from gitopsd.objects import Body


def config_map(name: str, labels: dict[str, str], annotations: dict[str, str]) -> Body:
    fields = {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}}}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "n",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": "2026-11-23T10:00:00Z",
            "labels": labels,
            "annotations": annotations,
            "managedFields": [
                {
                    "manager": "gitopsd",
                    "operation": "Apply",
                    "apiVersion": "v1",
                    "time": "2026-11-23T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields,
                }
            ],
        },
        "data": {"k": name},
        "status": {"phase": "Ready", "conditions": [], "lastScheduleTime": "2026-11-23T10:00:00Z"},
    }


def trie(body: Body) -> Body:
    fields: Body = body["metadata"]["managedFields"][0]["fieldsV1"]
    return fields


def test_it_drops_only_what_drift_normalizes_away_and_keeps_what_health_reads() -> None:
    assert set(DROPPED_METADATA) <= set(diff.SERVER_METADATA)
    assert LAST_APPLIED == diff.LAST_APPLIED
    for annotated in ({}, {LAST_APPLIED: "{}"}, {LAST_APPLIED: "{}", "team": "ops"}):
        body = config_map("a", {"app": "a"}, annotated)

        projected = Projection().of(body)

        assert diff.normalize(projected) == diff.normalize(body)
        assert projected["status"] == health.essentials(body)
        assert "lastScheduleTime" not in projected["status"]
        assert projected["metadata"]["generation"] == 1
        assert health.assess(projected) == health.assess(body)
        assert LAST_APPLIED not in projected["metadata"].get("annotations", {})
        kept = ("uid", "resourceVersion", "managedFields", "labels")
        assert all(projected["metadata"][name] == body["metadata"][name] for name in kept)


def test_equal_tries_are_shared_and_the_objects_read_are_left_as_they_were() -> None:
    projection = Projection()
    first, second = config_map("a", {"app": "x"}, {}), config_map("b", {"app": "y"}, {})
    other = config_map("c", {"tier": "web"}, {})
    untouched = copy.deepcopy(first)

    a, b, c = projection.of(first), projection.of(second), projection.of(other)

    assert trie(a) is trie(b) and trie(c) is not trie(a)
    assert trie(c) == trie(other) and a["data"] == {"k": "a"} and b["data"] == {"k": "b"}
    assert first == untouched


def test_the_memory_of_tries_is_bounded_and_sharing_goes_on_past_the_bound() -> None:
    projection = Projection()
    labels: dict[str, str] = {}
    for number in range(SHARED_TRIES + 10):
        labels = {f"label-{number}": "v"}
        last = projection.of(config_map("a", labels, {}))

    assert len(projection.tries) <= SHARED_TRIES
    assert trie(projection.of(config_map("b", labels, {}))) is trie(last)


def test_keys_and_short_strings_are_shared_between_objects_decoded_apart() -> None:
    """Objects decoded from separate watch events have separate copies of every string."""
    long_text = "x" * 100
    decoded = [
        json.loads(json.dumps(config_map(name, {"app": "web"}, {"note": long_text})))
        for name in ("a", "b")
    ]
    projection = Projection()

    first, second = (projection.of(body) for body in decoded)

    assert [first, second] == [projection.of(copy.deepcopy(body)) for body in decoded]
    assert next(k for k in first if k == "kind") is next(k for k in second if k == "kind")
    assert first["metadata"]["labels"]["app"] is second["metadata"]["labels"]["app"]
    assert first["metadata"]["annotations"]["note"] is not second["metadata"]["annotations"]["note"]


def test_data_nested_too_deep_to_walk_is_kept_as_it_came() -> None:
    deep: Body = {}
    inner = deep
    for _ in range(5000):  # deeper than the interpreter lets a walk recurse
        inner["a"] = {}
        inner = inner["a"]
    body = {**config_map("a", {}, {}), "spec": deep}

    assert Projection().of(body)["spec"] is deep


def test_an_empty_status_is_not_kept_as_it_assesses_as_none() -> None:
    body = config_map("a", {}, {}) | {"apiVersion": "apps/v1", "kind": "Deployment", "status": {}}

    projected = Projection().of(body)

    assert "status" not in projected and health.assess(projected) == health.assess(body)


def test_a_status_of_empty_fields_is_not_kept_nor_the_generation_without_a_status() -> None:
    service = config_map("a", {}, {}) | {
        "kind": "Service",
        "spec": {"type": "ClusterIP"},
        "status": {"loadBalancer": {}, "conditions": []},
    }

    projected = Projection().of(service)

    assert "status" not in projected and "generation" not in projected["metadata"]
    assert health.assess(projected) == health.assess(service)
