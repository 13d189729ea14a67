"""Objects read back from the API server, as a test checks what a sync left: ConfigMaps
(their names, one of them, a value they hold), a Deployment's replicas, Jobs and a Job's uid.
A read of one object answers None when it is not there."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.harness.controllers import ROOT_CA_CONFIG_MAP


def config_map_names(admin_api: Any, namespace: str) -> set[str]:
    """The ConfigMaps of `namespace` but the one the cluster publishes in each (the CA)."""
    core: Any = client.CoreV1Api(admin_api)
    items = core.list_namespaced_config_map(namespace).items
    return {item.metadata.name for item in items} - {ROOT_CA_CONFIG_MAP}


def config_map_named(admin_api: Any, namespace: str, name: str) -> Any:
    core: Any = client.CoreV1Api(admin_api)
    found = core.list_namespaced_config_map(namespace, field_selector=f"metadata.name={name}")
    return found.items[0] if found.items else None


def config_map_value(admin_api: Any, namespace: str, name: str, key: str = "k") -> str | None:
    core: Any = client.CoreV1Api(admin_api)
    found = core.list_namespaced_config_map(namespace, field_selector=f"metadata.name={name}")
    return found.items[0].data.get(key) if found.items else None


def config_map_data_value(api: Any, namespace: str, name: str) -> str | None:
    """The data key `value` of ConfigMap `name`, read by name (what config_map_with_value
    writes): a ConfigMap without that key fails the read."""
    core: Any = client.CoreV1Api(api)
    try:
        value: str = core.read_namespaced_config_map(name, namespace).data["value"]
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return value


def replicas(admin_api: Any, namespace: str, name: str = "web") -> int | None:
    apps: Any = client.AppsV1Api(admin_api)
    found = apps.list_namespaced_deployment(namespace, field_selector=f"metadata.name={name}")
    return int(found.items[0].spec.replicas) if found.items else None


def job_uid(admin_api: Any, namespace: str, name: str) -> str | None:
    batch: Any = client.BatchV1Api(admin_api)
    found = batch.list_namespaced_job(namespace, field_selector=f"metadata.name={name}").items
    return str(found[0].metadata.uid) if found else None


def jobs_by_name(admin_api: Any, namespace: str) -> dict[str, Any]:
    batch: Any = client.BatchV1Api(admin_api)
    return {job.metadata.name: job for job in batch.list_namespaced_job(namespace).items}
