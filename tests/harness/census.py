"""The census after a daemon test: every object that carries a source's ApplySet label is
in that source's record with the uid it has (no orphan: nothing applied and left out of
the record, which no later prune could prove its own), and every DELETE a daemon sent
named the exact object it had read, by uid, so it deleted nothing else. Read from the API
server and its audit log once the daemons stopped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kubernetes import client

from gitopsd import inventory
from gitopsd.objects import (
    APPLYSET_GROUP_KINDS_ANNOTATION,
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    ObjectKey,
)
from tests.harness import audit
from tests.harness.controlplane import ControlPlane


def problems(
    plane: ControlPlane, kubectl: Path, admin_api: Any, namespace: str, users: list[str]
) -> list[str]:
    """What breaks the census of the ApplySets in `namespace` and of the daemons that ran as
    `users`."""
    core: Any = client.CoreV1Api(admin_api)
    parents = core.list_namespaced_config_map(namespace, label_selector=APPLYSET_ID_LABEL).items
    found = []
    for parent in parents:
        found += _orphans(plane, kubectl, admin_api.sanitize_for_serialization(parent))
    for user in users:
        found += _deletes_without_uid(plane, user)
    return found


def recorded_names(admin_api: Any, namespace: str, parent_name: str) -> dict[str, str]:
    """name -> uid prefix of each ConfigMap the parent records."""
    parent = client.CoreV1Api(admin_api).read_namespaced_config_map(parent_name, namespace)
    record = inventory.recorded(admin_api.sanitize_for_serialization(parent))
    return {key.name: uid for key, uid in record.items() if key.kind == "ConfigMap"}


def uid_prefixes(admin_api: Any, namespace: str) -> dict[str, str]:
    """name -> uid prefix (as records hold it) of every ConfigMap of `namespace`."""
    items: Any = client.CoreV1Api(admin_api).list_namespaced_config_map(namespace).items
    return {
        i.metadata.name: inventory.uid_prefix({"metadata": {"uid": i.metadata.uid}}) for i in items
    }


def _orphans(plane: ControlPlane, kubectl: Path, parent: dict[str, Any]) -> list[str]:
    metadata = parent["metadata"]
    applyset_id = metadata["labels"][APPLYSET_ID_LABEL]
    record = {_identity(key): uid for key, uid in inventory.recorded(parent).items()}
    listed = (metadata.get("annotations") or {}).get(APPLYSET_GROUP_KINDS_ANNOTATION, "")
    kinds = {kind for kind in listed.split(",") if kind} | {kind for kind, _, _ in record}
    found = []
    for kind in sorted(kinds):
        for body in _labelled(plane, kubectl, kind, applyset_id):
            place = (kind, body["metadata"].get("namespace", ""), body["metadata"]["name"])
            if record.get(place) != inventory.uid_prefix(body):
                found.append(f"{'/'.join(place)} carries {applyset_id}, not recorded with its uid")
    return found


def _identity(key: ObjectKey) -> tuple[str, str, str]:
    """(Kind.group, namespace, name): kinds as the parent's annotation and kubectl name them."""
    return (f"{key.kind}.{key.group}" if key.group else key.kind, key.namespace, key.name)


def _labelled(plane: ControlPlane, kubectl: Path, kind: str, applyset_id: str) -> list[Any]:
    selector = f"{APPLYSET_PART_OF_LABEL}={applyset_id}"
    argv = [str(kubectl), "--kubeconfig", str(plane.kubeconfig), "get", kind, "-A"]
    done = subprocess.run(
        [*argv, "-l", selector, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # a kind no longer served (its CRD deleted): nothing to see
        return []
    items: list[Any] = json.loads(done.stdout)["items"]
    return items


def _deletes_without_uid(plane: ControlPlane, user: str) -> list[str]:
    return [
        f"{user} deleted {w.resource}/{w.namespace}/{w.name} without a uid precondition"
        for w in audit.changes(plane, user)
        if w.verb == "delete" and not ((w.request or {}).get("preconditions") or {}).get("uid")
    ]
