"""TA-01: a health wait (sync waves, hooks, `sync --wait`) reads its objects concurrently
but assesses them on its own thread, so a source's rules waiting for their turn in the
daemon's evaluator never park the fan-out threads every source shares; and it stops
assessing once its deadline passes or the cluster is fenced. A cluster that answers from a
dict stands in for the API server: what is asserted is where and when rules run."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest

from gitopsd.changes import Target
from gitopsd.cluster import Cluster
from gitopsd.health import HealthCheck, Status
from gitopsd.health.expressions import evaluate_here, evaluate_with
from gitopsd.objects import GroupKind, ObjectKey, Origin, Resource
from gitopsd.resources import CONFIG_MAPS
from gitopsd.waiting import NOT_ASSESSED, HealthWait

RULE = HealthCheck("v1", "ConfigMap", current="has(data.value)", namespace="tenant")


class Answering:
    """Answers every GET with a ConfigMap; writable until `fence_after` rules ran."""

    def __init__(self, fence_after: int = 1_000) -> None:
        self.fence_after, self.rules_run = fence_after, 0

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"value": "x"},
        }

    def writable(self) -> bool:
        return self.rules_run < self.fence_after


def targets(count: int) -> list[Target]:
    keys = [ObjectKey("", "ConfigMap", "tenant", f"c{n}") for n in range(count)]
    return [Target(key, {"metadata": {"name": key.name}}, Origin("c.yaml", 1), CONFIG_MAPS)
            for key in keys]  # fmt: skip


@pytest.fixture
def threads_of_rules() -> Iterator[list[threading.Thread]]:
    seen: list[threading.Thread] = []

    def evaluate(namespace: str, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
        seen.append(threading.current_thread())
        return evaluate_here(namespace, text, variables)

    evaluate_with(evaluate)
    yield seen
    evaluate_with(evaluate_here)


def test_ta01_rules_of_a_wait_run_on_the_waiting_thread(
    threads_of_rules: list[threading.Thread],
) -> None:
    cluster = Answering()
    wait = HealthWait(cast(Cluster, cluster), checks={GroupKind("", "ConfigMap"): RULE})

    healths = wait.until_healthy(targets(20), timeout_seconds=30)

    assert {health.status for health in healths.values()} == {Status.CURRENT}
    assert len(threads_of_rules) == 20
    assert set(threads_of_rules) == {threading.current_thread()}


def test_ta01_a_wait_stops_assessing_once_the_cluster_is_fenced(
    threads_of_rules: list[threading.Thread],
) -> None:
    cluster = Answering(fence_after=3)

    def counted(namespace: str, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
        cluster.rules_run += 1
        return evaluate_here(namespace, text, variables)

    evaluate_with(counted)
    wait = HealthWait(cast(Cluster, cluster), checks={GroupKind("", "ConfigMap"): RULE})

    healths = wait.until_healthy(targets(10), timeout_seconds=30)

    assert cluster.rules_run == 3
    assert list(healths.values()).count(NOT_ASSESSED) == 7
