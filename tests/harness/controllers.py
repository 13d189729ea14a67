"""The rest of a control plane beside the test API server: kube-controller-manager,
kube-scheduler, and kwok playing the kubelets of a few simulated nodes.

With them, Deployments roll out through ReplicaSets and Pods, Jobs complete (or fail when
their pod template carries FAILING_POD_LABEL), pods whose template no node matches stay
Pending, namespaces are emptied and removed, owned objects are garbage-collected and the
aggregated ClusterRoles (`view`, `edit`, `admin`) have their rules. Each component
authenticates as its own user, so the audit log tells their writes from the tests'.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTROLLERS = (
    "serviceaccount-token,serviceaccount,root-ca-cert-publisher,namespace,garbagecollector,"
    "deployment,replicaset,statefulset,daemonset,job,cronjob,ttl-after-finished,podgc,"
    "resourcequota,clusterrole-aggregation,pvc-protection,pv-protection"
)
"""What a cluster does to the objects gitopsd applies; node lifecycle, IPAM, endpoints and
the cloud are left out (kwok's nodes need none of them)."""
USERS = {
    "kube-controller-manager": "system:kube-controller-manager",
    "kube-scheduler": "system:kube-scheduler",
    "kwok": "kwok",
}
NODES = ("kwok-node-0", "kwok-node-1", "kwok-node-2")
MANAGED_BY_KWOK = "kwok.x-k8s.io/node=fake"
POD_CIDR = "10.244.0.1/16"  # kwok's default overlaps the Service range
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
"""What the root-ca-cert-publisher puts in every namespace."""
FAILING_POD_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
"""A pod labelled with this (value "true") fails: kwok's chaos stage, for Jobs that fail."""
NOWHERE = {"gitopsd.io/test": "nowhere"}
"""A node selector no node matches: the pods stay Pending for good."""


@dataclass(frozen=True)
class ControllerBinaries:
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kwok_stages: Path


@dataclass(frozen=True)
class Component:
    """A process to start, the HTTP endpoint that says it is healthy, and its environment."""

    name: str
    argv: list[str]
    health_url: str
    environment: dict[str, str] = field(default_factory=dict)

    def healthy(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its own self-signed loopback certificate
        try:
            with urllib.request.urlopen(self.health_url, context=context, timeout=2) as answer:  # noqa: S310 - our own loopback URL
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False


def components(
    binaries: ControllerBinaries, workdir: Path, pki: Path, ports: dict[str, int]
) -> list[Component]:
    """The three processes; `ports` holds a free loopback port per component name, and
    `kubeconfig_of(workdir, name)` a kubeconfig for its user."""

    def kubeconfig(name: str) -> str:
        return str(kubeconfig_of(workdir, name))

    def serving(name: str) -> dict[str, str]:
        return {"--bind-address": "127.0.0.1", "--secure-port": str(ports[name])}

    controller_manager = {
        "--kubeconfig": kubeconfig("kube-controller-manager"),
        "--controllers": CONTROLLERS,
        "--service-account-private-key-file": str(pki / "sa.key"),
        "--root-ca-file": str(pki / "ca.crt"),
        "--leader-elect": "false",
        "--kube-api-qps": "100",
        "--kube-api-burst": "200",
        **serving("kube-controller-manager"),
    }
    scheduler = {
        "--kubeconfig": kubeconfig("kube-scheduler"),
        "--leader-elect": "false",
        "--kube-api-qps": "100",
        "--kube-api-burst": "200",
        **serving("kube-scheduler"),
    }
    kwok = {
        "--kubeconfig": kubeconfig("kwok"),
        "--config": str(binaries.kwok_stages),
        "--manage-nodes-with-annotation-selector": MANAGED_BY_KWOK,
        "--cidr": POD_CIDR,
        "--node-lease-duration-seconds": "0",
        "--server-address": f"127.0.0.1:{ports['kwok']}",
    }
    home = workdir / "kwok-home"  # kwok reads ~/.kwok/kwok.yaml first: not the user's
    home.mkdir(exist_ok=True)
    return [
        Component(
            "kube-controller-manager",
            [str(binaries.kube_controller_manager), *as_arguments(controller_manager)],
            f"https://127.0.0.1:{ports['kube-controller-manager']}/healthz",
        ),
        Component(
            "kube-scheduler",
            [str(binaries.kube_scheduler), *as_arguments(scheduler)],
            f"https://127.0.0.1:{ports['kube-scheduler']}/healthz",
        ),
        Component(
            "kwok",
            [str(binaries.kwok), *as_arguments(kwok)],
            f"http://127.0.0.1:{ports['kwok']}/healthz",
            {"HOME": str(home)},
        ),
    ]


def kubeconfig_of(workdir: Path, name: str) -> Path:
    return workdir / f"{name}.kubeconfig"


def node(name: str) -> dict[str, object]:
    """A Node kwok plays: untainted, so any pod may be scheduled on it."""
    key, value = MANAGED_BY_KWOK.split("=")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
        },
    }


STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "kwok-volume",  # the class kwok's volume stages provision for
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "kwok.x-k8s.io/volume",
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
}
"""The default StorageClass: a claim without a class (a StatefulSet's) is bound at once."""


def probe(name: str) -> dict[str, object]:
    """A Deployment of one pod, whose readiness needs the deployment and replica set
    controllers, the scheduler and kwok all watching the API server."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"gitopsd-harness": "probe"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "probe", "image": "probe"}]},
            },
        },
    }


def probe_ready(found: Any) -> bool:
    return bool(found.get("status", {}).get("readyReplicas") == 1)


def node_ready(found: Any) -> bool:
    conditions = found.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def as_arguments(flags: dict[str, str]) -> list[str]:
    return [f"{flag}={value}" for flag, value in flags.items()]
