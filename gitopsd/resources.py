"""The built-in kinds gitopsd reads and writes for its own work, in one place: each as a
`Resource` (where its objects live in the REST API) and, where rules name the kind, as a
`GroupKind`. Kinds of custom resources are resolved through discovery instead."""

from __future__ import annotations

from gitopsd.objects import GroupKind, Resource

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
"""ApplySet parents are ConfigMaps."""
SECRETS = Resource("", "v1", "Secret", "secrets", namespaced=True)
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", namespaced=False)
EVENTS = Resource("", "v1", "Event", "events", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases", namespaced=True)
NODES = Resource("", "v1", "Node", "nodes", namespaced=False)
SERVICE_CIDRS = Resource("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", namespaced=False)
"""The cluster's service networks (Kubernetes 1.33 and later)."""
ACCESS_REVIEWS = Resource(
    "authorization.k8s.io",
    "v1",
    "SelfSubjectAccessReview",
    "selfsubjectaccessreviews",
    namespaced=False,
)
"""Asks what the requester may do (every authenticated user may ask about itself)."""
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
)

NAMESPACE = GroupKind("", "Namespace")
CUSTOM_RESOURCE_DEFINITION = GroupKind("apiextensions.k8s.io", "CustomResourceDefinition")
