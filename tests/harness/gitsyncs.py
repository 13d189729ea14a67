"""GitSync custom resources as the operator tests create, change and read them, and the
git credentials a GitSync's repository may name."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.harness.cluster_reads import config_map_data_value
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_with_value
from tests.harness.waiting import wait_for

GROUP, VERSION, PLURAL = "gitopsd.io", "v1alpha1", "gitsyncs"


def create(api: Any, namespace: str, name: str, spec: dict[str, Any], **metadata: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GitSync",
        "metadata": {"name": name, "namespace": namespace, **metadata},
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


def condition(gitsync: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    conditions = ((gitsync or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def ready_message(admin_api: Any, namespace: str, name: str) -> str:
    return str(condition(get(admin_api, namespace, name), "Ready").get("message", ""))


def wait_ready(
    api: Any, namespace: str, name: str, status: str, reason: str, deadline: float = 60
) -> dict[str, Any]:
    """The GitSync once its Ready condition has `status` and `reason` for its generation."""

    def reached() -> dict[str, Any] | None:
        found = get(api, namespace, name)
        ready = condition(found, "Ready")
        generation = (found or {}).get("metadata", {}).get("generation")
        observed = (found or {}).get("status", {}).get("observedGeneration")
        met = (ready.get("status"), ready.get("reason")) == (status, reason)
        return found if met and observed == generation else None

    return wait_for(reached, f"GitSync {name} Ready={status} ({reason})", deadline)


def events(api: Any, namespace: str, name: str) -> list[Any]:
    core: Any = client.CoreV1Api(api)
    selector = f"involvedObject.kind=GitSync,involvedObject.name={name}"
    found: list[Any] = core.list_namespaced_event(namespace, field_selector=selector).items
    return found


def credentials_secret(api: Any, namespace: str, git_server: GitServer, for_url: str) -> str:
    """The git server's credentials, opted in (by its owner, an admin) for `for_url`."""
    core: Any = client.CoreV1Api(api)
    annotations = {"gitopsd.io/git-credentials-for": for_url}
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "git-credentials", "annotations": annotations},
            "stringData": {"username": git_server.username, "password": git_server.password},
        },
    )
    return "git-credentials"


def heals(admin_api: Any, namespace: str, git_server: GitServer, git_repo: GitRepo) -> None:
    """The tenant's GitSync becomes Ready, and an out-of-band edit is healed."""
    git_repo.commit({"c.yaml": config_map_with_value("c")})
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=90)
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("c", namespace, {"data": {"value": "edited"}})
    wait_for(
        lambda: config_map_data_value(admin_api, namespace, "c") == "one",
        "the other tenant's edit healed",
        deadline_seconds=60,
    )
