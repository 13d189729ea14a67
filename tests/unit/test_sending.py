"""The fan-out every object's request goes through: each object's answer or its failure, and
no request sent once writes are fenced or a request found the API server gone. The requests
are the test's own functions: what is asserted is which of them ran and what each came to."""

from __future__ import annotations

from typing import Any, cast

from gitopsd.changes import Target
from gitopsd.cluster import Cluster
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import Body, ObjectKey, Origin
from gitopsd.resources import CONFIG_MAPS
from gitopsd.sending import send_each

TARGETS = [
    Target(key, {"metadata": {"name": key.name}}, Origin("c.yaml", n + 1), CONFIG_MAPS)
    for n, key in enumerate(ObjectKey("", "ConfigMap", "tenant", f"c{n}") for n in range(3))
]


def cluster(writable: bool = True) -> Cluster:
    return Cluster(api=cast(Any, None), discovery=cast(Any, None), may_write=lambda: writable)


def test_each_object_has_its_answer_or_its_failure_naming_its_file() -> None:
    def call(target: Target) -> Body:
        if target.key.name == "c1":
            raise ClusterError("admission webhook denied the request", ClusterReason.FORBIDDEN)
        return {"answered": target.key.name}

    sent = send_each(cluster(), TARGETS, call, concurrency=4)

    assert sent.answers == {TARGETS[0].key: {"answered": "c0"}, TARGETS[2].key: {"answered": "c2"}}
    [failure] = sent.failures
    assert failure.reason == ClusterReason.FORBIDDEN
    assert failure.message == (
        "ConfigMap/tenant/c1 (c.yaml:2): admission webhook denied the request"
    )


def test_a_fenced_cluster_is_sent_no_request() -> None:
    called: list[Target] = []

    def call(target: Target) -> Body:
        called.append(target)
        return {}

    sent = send_each(cluster(writable=False), TARGETS, call, concurrency=4)

    assert called == [] and sent.answers == {}
    assert [f.reason for f in sent.failures] == [ClusterReason.FENCED] * 3
    assert sent.failures[0].message == "ConfigMap/tenant/c0 (c.yaml:1): not sent: writes are fenced"


def test_once_a_request_finds_the_api_server_gone_the_queued_ones_are_not_sent() -> None:
    called: list[str] = []

    def call(target: Target) -> Body:
        called.append(target.key.name)
        raise ClusterError("connection refused", ClusterReason.UNREACHABLE)

    sent = send_each(cluster(), TARGETS, call, concurrency=1)  # one at a time: c0 goes first

    assert called == ["c0"]
    assert [f.reason for f in sent.failures] == [ClusterReason.UNREACHABLE] * 3
    assert sent.failures[1].message == (
        "ConfigMap/tenant/c1 (c.yaml:2): not sent: "
        "an earlier request of this sync could not reach the API server"
    )
