"""The cluster's networks, as it publishes them (TA-05): its ServiceCIDRs and its nodes' pod
CIDRs, each parsed; what is not a network is skipped, not fenced by a guess."""

from __future__ import annotations

from typing import cast

import pytest

from gitopsd.cluster import Cluster
from gitopsd.daemon.networks import ClusterNetworks, pod_cidrs, service_cidrs
from gitopsd.errors import ClusterError
from gitopsd.objects import Body, ObjectKey, Resource


def test_ta05_service_cidrs_and_pod_cidrs_are_read_from_their_objects() -> None:
    services: list[Body] = [
        {"spec": {"cidrs": ["10.96.0.0/12", "fd00:10:96::/112"]}},
        {"spec": {}},  # a ServiceCIDR being created has none yet
    ]
    nodes: list[Body] = [
        {"spec": {"podCIDRs": ["10.244.1.0/24"]}},
        {"spec": {"podCIDR": "10.244.2.0/24"}},
    ]

    assert service_cidrs(services) == ["10.96.0.0/12", "fd00:10:96::/112"]
    assert pod_cidrs(nodes) == ["10.244.1.0/24"]  # podCIDR alone is the older mirror of it


def test_ta05_what_is_not_a_network_is_skipped() -> None:
    assert service_cidrs([{"spec": {"cidrs": ["10.0.0.0/33", 7, "10.0.0.1/16"]}}]) == [
        "10.0.0.0/16"  # host bits of a CIDR are ignored, as the API server itself does
    ]
    assert pod_cidrs([{"spec": {"podCIDRs": "10.244.0.0/24"}}]) == []  # not a list


class Listing:
    """The lists a cluster answers, in turn; a ClusterError where it cannot read one."""

    def __init__(self, *answers: dict[str, list[Body]] | None) -> None:
        self.answers = list(answers)
        self.answer: dict[str, list[Body]] | None = None

    def list_objects(self, resource: Resource, projected: bool = False) -> list[Body]:
        assert projected
        if resource.plural == "servicecidrs":  # the first of each reading
            self.answer = self.answers.pop(0)
        if self.answer is None:
            raise ClusterError(f"{resource.plural} is forbidden")
        return self.answer.get(resource.plural, [])


NODE = {"spec": {"podCIDRs": ["10.244.1.0/24"]}}
JOINED = {"spec": {"podCIDRs": ["10.244.2.0/24"]}}


def test_ta05_what_is_listed_at_start_is_fenced_and_only_what_was_read_is_watched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = Listing(None)
    networks = ClusterNetworks(cast(Cluster, cluster), listed=("10.96.0.0/12",))
    assert networks.learn() == []  # neither read: nothing watched
    assert [r.message.split(" ")[0] for r in caplog.records] == ["servicecidrs", "nodes"]

    networks = ClusterNetworks(cast(Cluster, Listing({"nodes": [NODE]})), listed=())
    assert [resource.plural for resource in networks.learn()] == ["servicecidrs", "nodes"]
    assert networks.current() == ("10.244.1.0/24",)


def test_ta05_a_node_that_joins_is_fenced_from_its_watch_event_and_kept_by_none() -> None:
    networks = ClusterNetworks(cast(Cluster, Listing({"nodes": [NODE]})), listed=())
    networks.learn()
    keep = networks.keeper(pod_cidrs)
    assert keep(ObjectKey("", "Node", "", "joined"), JOINED) is False
    assert networks.current() == ("10.244.1.0/24", "10.244.2.0/24")
    keep(ObjectKey("", "Node", "", "joined"), JOINED)  # told again: nothing added
    assert networks.current() == ("10.244.1.0/24", "10.244.2.0/24")


def test_ta05_a_range_inside_a_listed_network_is_not_added_again() -> None:
    networks = ClusterNetworks(
        cast(Cluster, Listing({"nodes": [NODE, JOINED]})), ("10.244.0.0/16",)
    )
    networks.learn()
    assert networks.current() == ()
