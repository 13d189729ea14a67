"""Discovery: which kinds are served (a group whose discovery failed serves none), and REST
paths, every segment percent-encoded so that no name can address another object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gitopsd.cluster.discovery import Discovery
from gitopsd.objects import GroupKind, Resource

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False)


@pytest.mark.case("SE-11")
@pytest.mark.parametrize(
    ("resource", "namespace", "name", "path"),
    [
        (CONFIG_MAPS, "ns", "", "/api/v1/namespaces/ns/configmaps"),
        (CONFIG_MAPS, "ns", "a.b", "/api/v1/namespaces/ns/configmaps/a.b"),
        (
            CONFIG_MAPS,
            "ns",
            "../../kube-system/configmaps/victim",
            "/api/v1/namespaces/ns/configmaps/..%2F..%2Fkube-system%2Fconfigmaps%2Fvictim",
        ),
        (CONFIG_MAPS, "..", "x", "/api/v1/namespaces/%2E%2E/configmaps/x"),
        (CONFIG_MAPS, "ns", ".", "/api/v1/namespaces/ns/configmaps/%2E"),
        (
            CLUSTER_ROLES,
            "",
            "system:x?dryRun=All%",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Ax%3FdryRun%3DAll%25",
        ),
    ],
)
def test_se11_each_path_segment_is_encoded(
    resource: Resource, namespace: str, name: str, path: str
) -> None:
    assert resource.path(namespace, name) == path


def group(name: str, *versions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "versions": list(versions)}


def version(name: str, *kinds: str, freshness: str = "Current") -> dict[str, Any]:
    resources = [
        {"resource": f"{kind.lower()}s", "responseKind": {"kind": kind}, "scope": "Namespaced"}
        for kind in kinds
    ]
    return {"version": name, "resources": resources, "freshness": freshness}


@dataclass
class AggregatedDiscovery:
    """Answers /api and /apis as the API server's aggregated discovery (v2) does."""

    groups: list[dict[str, Any]]

    def request(self, method: str, path: str, accept: str = "") -> dict[str, Any]:
        return {"items": [] if path == "/api" else self.groups}


@pytest.mark.case("FA-14")
def test_fa14_a_stale_group_serves_nothing_and_is_named_as_failed() -> None:
    """v1.34 lists an APIService whose backend is missing as a version with freshness Stale
    (no resources, or the last ones known): none of it can be listed or applied."""
    discovery = Discovery(
        AggregatedDiscovery(  # type: ignore[arg-type]
            [
                group("metrics.example.com", version("v1", "Usage", freshness="Stale")),
                group("apps", version("v1", "Deployment")),
            ]
        )
    )
    assert discovery.preferred(GroupKind("metrics.example.com", "Usage")) is None
    assert discovery.find("metrics.example.com/v1", "Usage") is None
    assert discovery.failed_groups == {"metrics.example.com"}
    assert discovery.preferred(GroupKind("apps", "Deployment")) is not None


def test_a_kind_only_in_a_later_version_is_still_served() -> None:
    discovery = Discovery(
        AggregatedDiscovery(  # type: ignore[arg-type]
            [
                group(
                    "example.com",
                    version("v2", "Widget"),
                    version("v1", "Widget", "Gadget"),
                )
            ]
        )
    )
    assert discovery.preferred(GroupKind("example.com", "Widget")).version == "v2"  # type: ignore[union-attr]
    assert discovery.preferred(GroupKind("example.com", "Gadget")).version == "v1"  # type: ignore[union-attr]
