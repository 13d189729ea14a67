"""CRDs a sync created are waited for until Established and their kind served: the API
server serves a kind a moment after it sets Established (seen: a sync that looked in
between applied nothing of the kind and waited 5 minutes for it). A stand-in cluster here
makes that moment last; tests/integration covers the real one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gitopsd.cluster import definitions
from gitopsd.errors import ClusterError
from gitopsd.objects import GroupKind

CRD = {
    "spec": {"group": "shop.example", "names": {"kind": "Promotion"}},
    "status": {"conditions": [{"type": "Established", "status": "True"}]},
}


@dataclass
class LateDiscovery:
    served_after: int
    refreshes: int = 0

    def refresh(self) -> None:
        self.refreshes += 1

    def preferred(self, kind: GroupKind) -> object | None:
        served = self.refreshes >= self.served_after
        return object() if served and kind == GroupKind("shop.example", "Promotion") else None


@dataclass
class StandIn:
    discovery: LateDiscovery
    reads: list[str] = field(default_factory=list)

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any]:
        self.reads.append(name)
        return CRD


def test_a_kind_is_waited_for_until_discovery_serves_it() -> None:
    cluster = StandIn(LateDiscovery(served_after=3))

    definitions.wait_served(cluster, ["promotions.shop.example"], 5.0)  # type: ignore[arg-type]

    assert cluster.discovery.refreshes == 3 and cluster.reads == ["promotions.shop.example"]


def test_a_kind_never_served_is_a_timeout_naming_it() -> None:
    cluster = StandIn(LateDiscovery(served_after=10**9))

    with pytest.raises(ClusterError, match=r"CRDs not served after 0 s: Promotion\.shop\.example"):
        definitions.wait_served(cluster, ["promotions.shop.example"], 0.3)  # type: ignore[arg-type]
