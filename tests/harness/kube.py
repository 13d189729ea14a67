"""Helpers over the official client for tests: namespaces, service-account tokens, kubeconfigs.

The client's typed models mark every field optional; tests hold them as Any and let the
assertions speak.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness.controlplane import ControlPlane, write_kubeconfig
from tests.harness.waiting import wait_for


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


def account(
    plane: ControlPlane, admin_api: Any, namespace: str, at: Path, role: str, *extra: str
) -> str:
    """A kubeconfig for a ServiceAccount of `namespace` bound, there only, to the
    ClusterRole `role`, and to a Role granting `extra` verbs on ConfigMaps."""
    name = f"{role}-user"
    token = service_account_token(admin_api, namespace, name)
    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    binding = {"metadata": {"name": name}, "roleRef": role_ref, "subjects": subject}
    rbac.create_namespaced_role_binding(namespace, binding)
    if extra:
        rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": list(extra)}
        rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": [rule]})
        own = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        rbac.create_namespaced_role_binding(
            namespace, {"metadata": {"name": f"{name}-own"}, "roleRef": own, "subjects": subject}
        )
    return str(kubeconfig_for(plane, at / f"{name}.kubeconfig", name, token))


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
        self.namespace = namespace
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
        """Labels the node to match, then waits until every held pod is bound. A scheduler
        that found no node for a pod a moment before the label came may miss the node's
        change and not look again for five minutes (seen: 12:44:10.826 unschedulable, the
        label at .850, bound at 12:49:26), so the node is touched again every 2 s until then."""
        self._label_node("open")
        nudged = [time.monotonic()]

        def bound() -> bool:
            if all(pod.spec.node_name for pod in self._held()):
                return True
            if time.monotonic() - nudged[0] >= 2.0:
                nudged[0] = time.monotonic()
                self._touch_node()
            return False

        wait_for(bound, "the held pods to be scheduled once the gate opened", 60)

    def _held(self) -> list[Any]:
        core: Any = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(self.namespace).items
        return [p for p in pods if (p.spec.node_selector or {}).get(self.label) == "open"]

    def _touch_node(self) -> None:
        """A label change (an annotation's would not do: the scheduler's node-affinity
        check listens to label updates only)."""
        core: Any = client.CoreV1Api(self.api)
        touched = {f"{self.label}-touched": str(time.monotonic_ns())}
        core.patch_node(self.node, {"metadata": {"labels": touched}})

    def close(self) -> None:
        core: Any = client.CoreV1Api(self.api)
        labels = {self.label: None, f"{self.label}-touched": None}
        core.patch_node(self.node, {"metadata": {"labels": labels}})

    def _label_node(self, value: str | None) -> None:
        core: Any = client.CoreV1Api(self.api)
        core.patch_node(self.node, {"metadata": {"labels": {self.label: value}}})


def wait_established(api: Any, name: str) -> None:
    """Waits until CRD `name` is Established. (`kubectl wait --for=condition=Established`
    fails at once, instead of waiting, while the new CRD has no conditions yet: seen on a
    loaded machine.)"""
    extensions: Any = client.ApiextensionsV1Api(api)

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(name).status.conditions
        return any(c.type == "Established" and c.status == "True" for c in conditions or [])

    wait_for(established, f"CRD {name} Established")
