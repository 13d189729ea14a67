"""GitSyncSet custom resources as the operator tests install, create, change and read them,
and the daemon that serves them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitsyncs import GROUP, VERSION, condition
from tests.harness.waiting import wait_for

PLURAL = "gitsyncsets"
CRD = Path(__file__).resolve().parents[2] / "config" / "crd" / "gitsyncsets.yaml"


def install_crd(api: Any) -> str:
    """The GitSyncSet CRD from config/crd, installed (and Established), in place of any
    earlier one."""
    definition = yaml.safe_load(CRD.read_text())
    extensions: Any = client.ApiextensionsV1Api(api)
    name: str = definition["metadata"]["name"]
    try:
        extensions.create_custom_resource_definition(definition)
    except client.ApiException as error:
        if error.status != 409:
            raise
        held = extensions.read_custom_resource_definition(name)  # an earlier one: this one now
        definition["metadata"]["resourceVersion"] = held.metadata.resource_version
        extensions.replace_custom_resource_definition(name, definition)
    wait_for(lambda: _established(extensions.read_custom_resource_definition(name)), name)
    return name


def _established(crd: Any) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def set_operator(daemons: Daemons, namespace: str, **top: Any) -> DaemonProcess:
    """A daemon serving the GitSyncs and GitSyncSets of `namespace` only; `top` adds
    top-level settings (`clusters`)."""
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True, "sets": True}
    return daemons.start_with([], "operator", gitSyncs=settings, **top).start()


def create(api: Any, namespace: str, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GitSyncSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"interval": "1s", **spec},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )


def patch_spec(api: Any, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
    )


def get(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    objects: Any = client.CustomObjectsApi(api)
    try:
        found: dict[str, Any] = objects.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def wait_ready(
    api: Any, namespace: str, name: str, status: str, reason: str, deadline: float = 60
) -> dict[str, Any]:
    """The set once its Ready condition has `status` and `reason` for its generation."""

    def reached() -> dict[str, Any] | None:
        found = get(api, namespace, name)
        ready = condition(found, "Ready")
        generation = (found or {}).get("metadata", {}).get("generation")
        observed = (found or {}).get("status", {}).get("observedGeneration")
        met = (ready.get("status"), ready.get("reason")) == (status, reason)
        return found if met and observed == generation else None

    return wait_for(reached, f"GitSyncSet {name} Ready={status} ({reason})", deadline)


def gitsync_names(api: Any, namespace: str) -> list[str]:
    """The names of the GitSyncs of `namespace`."""
    objects: Any = client.CustomObjectsApi(api)
    found = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, "gitsyncs")
    return sorted(item["metadata"]["name"] for item in found["items"])


def events(api: Any, namespace: str, name: str) -> list[Any]:
    core: Any = client.CoreV1Api(api)
    selector = f"involvedObject.kind=GitSyncSet,involvedObject.name={name}"
    found: list[Any] = core.list_namespaced_event(namespace, field_selector=selector).items
    return found
