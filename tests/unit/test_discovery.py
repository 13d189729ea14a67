"""REST paths: every segment is percent-encoded, so no name can address another object."""

from __future__ import annotations

import pytest

from gitopsd.cluster.discovery import Resource

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False)


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
