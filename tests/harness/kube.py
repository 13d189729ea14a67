"""Helpers over the official client for tests: namespaces, service-account tokens, kubeconfigs.

The client's typed models mark every field optional; tests hold them as Any and let the
assertions speak.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness.controlplane import ControlPlane, write_kubeconfig


def api_client(plane: ControlPlane, token: str | None = None) -> Any:
    """An ApiClient for the control plane, as admin unless another bearer token is given."""
    configuration = client.Configuration()
    configuration.host = plane.url
    configuration.ssl_ca_cert = str(plane.ca_file)
    configuration.api_key = {"authorization": token or plane.admin_token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def create_namespace(api: Any, prefix: str = "t") -> str:
    name = unique_name(prefix)
    core: Any = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    return name


def service_account_token(api: Any, namespace: str, name: str) -> str:
    """Creates ServiceAccount `name` and returns a short-lived token for it (TokenRequest)."""
    core: Any = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    return token_of(api, namespace, name)


def token_of(api: Any, namespace: str, name: str) -> str:
    """A short-lived token (TokenRequest) for the existing ServiceAccount `name`."""
    core: Any = client.CoreV1Api(api)
    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    answer = core.create_namespaced_service_account_token(name, namespace, request)
    token: str = answer.status.token
    return token


def kubeconfig_for(
    plane: ControlPlane, path: Path, user: str, token: str, server: str = ""
) -> Path:
    """A kubeconfig for `user` that reaches the API server directly, or through `server`."""
    write_kubeconfig(path, server or plane.url, plane.ca_file, user, token)
    return path


def admin_service_account(api: Any, namespace: str, name: str) -> tuple[str, str]:
    """A ServiceAccount bound to cluster-admin, as a daemon deployed in-cluster would have:
    returns its user name (as the audit log records it) and a token."""
    token = service_account_token(api, namespace, name)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"{namespace}-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    return f"system:serviceaccount:{namespace}:{name}", token


class Gate:
    """Holds a rollout until the test lets it finish: pods whose template selects
    `node_selector` stay Pending (the scheduler finds no node) until `open()` labels a
    node to match, as a cluster gaining capacity would."""

    def __init__(self, api: Any, namespace: str, node: str) -> None:
        self.api = api
        self.label = f"gate.gitopsd.io/{namespace}"
        self.node = node

    @property
    def node_selector(self) -> dict[str, str]:
        return {self.label: "open"}

    def hold(self, manifest: str) -> str:
        """The Deployment (or other pod template owner) `manifest`, its pods held back."""
        owner = yaml.safe_load(manifest)
        owner["spec"]["template"]["spec"]["nodeSelector"] = self.node_selector
        return str(yaml.safe_dump(owner))

    def open(self) -> None:
        self._label_node("open")

    def close(self) -> None:
        self._label_node(None)

    def _label_node(self, value: str | None) -> None:
        core: Any = client.CoreV1Api(self.api)
        core.patch_node(self.node, {"metadata": {"labels": {self.label: value}}})
