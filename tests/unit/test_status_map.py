"""A configured source's status ConfigMap, read and patched: pure."""

from __future__ import annotations

import json
from typing import Any

from gitopsd.gitsync import RECONCILE_REQUESTED_ANNOTATION, status_map
from gitopsd.gitsync.spec import MAX_REQUEST


def _live(**data: str) -> dict[str, Any]:
    where = status_map.Where("ns/gitopsd-app", "east")
    body = status_map.status_map("app", "gitopsd-system", {"observedGeneration": 0}, where)
    body["metadata"]["resourceVersion"] = "7"
    body["data"] |= data
    return body


def test_a_status_map_is_its_sources_only_under_its_own_name() -> None:
    live = _live()
    assert status_map.source_of(live) == "app"
    assert status_map.status(live) == {"observedGeneration": 0}
    assert status_map.where(live) == status_map.Where("ns/gitopsd-app", "east")
    older = _live()
    del older["data"][status_map.CLUSTER_KEY]  # written before maps said their cluster
    assert status_map.where(older) == status_map.Where("ns/gitopsd-app", "in-cluster")
    renamed = {**live, "metadata": {**live["metadata"], "name": "gitopsd.source.other"}}
    assert status_map.source_of(renamed) == ""  # a label alone does not make one
    assert status_map.source_of(None) == ""


def test_suspension_and_requests_are_read_as_written() -> None:
    assert status_map.suspended(_live()) is False
    assert status_map.suspended(_live(suspend="true")) is True
    assert status_map.suspended(_live(suspend="yes")) is False
    requested = _live()
    requested["metadata"]["annotations"] = {RECONCILE_REQUESTED_ANNOTATION: "x" * 1000}
    assert status_map.requested(requested) == "x" * MAX_REQUEST


def test_a_status_that_is_not_a_json_object_or_too_big_reads_as_none() -> None:
    assert status_map.status(_live(status="[1]")) == {}
    assert status_map.status(_live(status="{not json")) == {}
    huge = json.dumps({"message": "m" * status_map.MAX_STATUS_BYTES})
    assert status_map.status(_live(status=huge)) == {}


def test_patches_test_the_version_read() -> None:
    live = _live()
    assert status_map.suspend_patch(live, True) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/data/suspend", "value": "true"},
    ]
    first = status_map.annotation_patch(live, "gitopsd.io/a~b", "t")
    assert first[1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {"gitopsd.io/a~b": "t"},
    }
    live["metadata"]["annotations"] = {"other": "1"}
    added = status_map.annotation_patch(live, "gitopsd.io/a~b", "t")
    assert added[1] == {"op": "add", "path": "/metadata/annotations/gitopsd.io~1a~0b", "value": "t"}
