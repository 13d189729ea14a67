"""`Cluster.allowed` asks the API server's authorizer with a SelfSubjectAccessReview: the
verb, the resource and the namespace asked about are those sent, and its answer is the
server's `allowed`."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from gitopsd.cluster import Cluster
from gitopsd.cluster.api import Api
from gitopsd.resources import CONFIG_MAPS, NAMESPACES
from tests.harness.scripted_api import Answer, Transport


def reviewed(allowed: bool) -> Answer:
    return Answer(201, json.dumps({"status": {"allowed": allowed}}).encode())


@pytest.mark.parametrize("allowed", [True, False])
def test_the_answer_is_the_servers_for_the_verb_resource_and_namespace_asked(
    allowed: bool,
) -> None:
    transport = Transport([reviewed(allowed)])
    cluster = Cluster(Api(transport), discovery=cast(Any, None))

    answer = cluster.allowed("delete", CONFIG_MAPS, "shop")

    assert answer is allowed
    assert transport.sent == ["POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
    assert transport.bodies[0]["spec"] == {
        "resourceAttributes": {
            "verb": "delete",
            "group": "",
            "resource": "configmaps",
            "namespace": "shop",
        }
    }


def test_without_a_namespace_it_asks_for_every_namespace_or_a_cluster_scoped_resource() -> None:
    transport = Transport([reviewed(True)])
    cluster = Cluster(Api(transport), discovery=cast(Any, None))

    cluster.allowed("create", NAMESPACES)

    assert "namespace" not in transport.bodies[0]["spec"]["resourceAttributes"]


def test_an_answer_without_a_status_is_no_permission() -> None:
    cluster = Cluster(Api(Transport([Answer(201, b"{}")])), discovery=cast(Any, None))

    assert cluster.allowed("get", CONFIG_MAPS, "shop") is False
