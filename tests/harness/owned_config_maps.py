"""The two ConfigMaps a prune could take, in the tests that prove nothing is pruned: their
files, and their resourceVersions read back, equal before and after when none was written
or deleted."""

from __future__ import annotations

from typing import Any

from kubernetes import client

OWNED = ("a", "b")


def versions(admin_api: Any, namespace: str) -> dict[str, str]:
    """name -> resourceVersion of each owned ConfigMap of `namespace`: equal before and
    after means none was written or deleted (the ApplySet parent records the revision
    that pruned nothing)."""
    items: Any = client.CoreV1Api(admin_api).list_namespaced_config_map(namespace).items
    found = {item.metadata.name: item.metadata.resource_version for item in items}
    return {name: found[name] for name in OWNED if name in found}


def owned_files(directory: str) -> dict[str, str | None]:
    return {
        f"{directory}{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        for name in OWNED
    }
