"""The cluster's networks, as it publishes them (TA-05): its ServiceCIDRs and its nodes' pod
CIDRs, each parsed; what is not a network is skipped, not fenced by a guess."""

from __future__ import annotations

from gitopsd.daemon.networks import pod_cidrs, service_cidrs
from gitopsd.objects import Body


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
