"""TA-05 (URL fencing): the addresses a chart fetch never connects to, decided before any
socket opens, literal addresses and their IPv4-mapped forms alike."""

from __future__ import annotations

import pytest

from gitopsd.config import Network
from gitopsd.source.network import Connector, Deadline, Fenced

CLUSTER = Network(cluster_networks=("10.96.0.0/12", "fd00:10::/64"))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.8.8.8",
        "::1",
        "::ffff:127.0.0.1",
        "169.254.169.254",
        "fe80::1",
        "0.0.0.0",  # noqa: S104 - an address refused, never bound
        "10.96.0.1",
        "::ffff:10.96.0.1",
        "fd00:10::1",
    ],
)
def test_ta05_loopback_link_local_and_the_cluster_networks_are_fenced(host: str) -> None:
    with pytest.raises(Fenced):
        Connector(CLUSTER, True, Deadline(5)).connect(host, 443, 1)


def test_ta05_insecure_sources_lift_the_fence() -> None:
    with pytest.raises(OSError) as refused:  # a closed port: connected to, not fenced
        Connector(CLUSTER, False, Deadline(5)).connect("127.0.0.1", 1, 1)
    assert not isinstance(refused.value, Fenced)
