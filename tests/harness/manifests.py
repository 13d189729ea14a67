"""Manifests as the tests commit or write them: ConfigMaps with and without data, annotated
or not, Deployments, Jobs and hook Jobs, a ReplicaSet, a custom resource with its CRD, a
small Helm chart; and the folders they are placed in.

Files are {relative path: content}, ready for GitRepo.commit (None there deletes a file)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tests.harness.controllers import FAILING_POD_LABEL

ARGO_WAVE = "argocd.argoproj.io/sync-wave"
"""Argo CD's sync-wave annotation, which gitopsd reads as it reads its own."""

CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: v}}\n"
"""A ConfigMap holding data k: v, its name to be formatted in; it names no namespace."""


def config_map_without_data(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def config_map_with_data(name: str, annotations: dict[str, str] | None = None) -> str:
    """A ConfigMap holding data k: v, and `annotations` (a hook's, a wave's) when given."""
    shown = "".join(f"\n    {key}: {value!r}" for key, value in (annotations or {}).items())
    notes = f"\n  annotations:{shown}" if shown else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{notes}\ndata:\n  k: v\n"


def config_map_with_value(name: str, value: str = "one", namespace: str = "") -> str:
    """A ConfigMap whose data key `value` holds `value`."""
    where = f"\n  namespace: {namespace}" if namespace else ""
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{where}\n"
        f"data:\n  value: {value}\n"
    )


def config_map_files(*names: str) -> dict[str, str | None]:
    """One file per ConfigMap, none holding data."""
    return {
        f"{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        for name in names
    }


def config_map_files_with_data(*names: str, value: str = "v") -> dict[str, str]:
    """One file per ConfigMap, each holding data k: `value`."""
    return {
        f"{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        f"data:\n  k: {value}\n"
        for name in names
    }


def each_in_its_folder(names: str, value: str) -> dict[str, str]:
    """A ConfigMap per name, in a folder of its name."""
    return {
        f"{name}/{name}.yaml": config_map_files_with_data(name, value=value)[f"{name}.yaml"]
        for name in names
    }


def deployment(
    name: str, wave: str = "", pods_on: dict[str, str] | None = None, deadline: int = 60
) -> dict[str, str]:
    """A Deployment of one replica; `pods_on` a node selector for its pods, `deadline` its
    progressDeadlineSeconds."""
    annotations = f"\n  annotations: {{gitopsd.io/sync-wave: '{wave}'}}" if wave else ""
    selector = f"\n      nodeSelector: {json.dumps(pods_on)}" if pods_on else ""
    return {
        f"{name}.yaml": f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}{annotations}
spec:
  replicas: 1
  progressDeadlineSeconds: {deadline}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:{selector}
      containers: [{{name: app, image: "registry.k8s.io/pause:3.10"}}]
"""
    }


def job(name: str, fails: bool = False) -> dict[str, str]:
    """A Job of one pod, which succeeds, or exits 1 when `fails` (kwok's chaos stage), in a
    file of its name."""
    return {f"{name}.yaml": hook_job(name, {}, fails)}


def hook_job(name: str, annotations: dict[str, str], fails: bool = False) -> str:
    """A Job of one pod with `annotations` (which make it a hook), which succeeds, or exits 1
    when `fails` (kwok's chaos stage)."""
    labels = f"\n    metadata: {{labels: {{{FAILING_POD_LABEL}: 'true'}}}}" if fails else ""
    shown = "".join(f"\n    {key}: {value!r}" for key, value in annotations.items())
    annotated = f"\n  annotations:{shown}" if annotations else ""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}{annotated}
spec:
  backoffLimit: 0
  template:{labels}
    spec:
      restartPolicy: Never
      containers: [{{name: run, image: "busybox:1.36", command: ["true"]}}]
"""


def replica_set(name: str, wave: str = "") -> str:
    """A ReplicaSet of one pause pod, in Argo CD's sync wave `wave` when given."""
    annotations = f"\n  annotations: {{{ARGO_WAVE}: '{wave}'}}" if wave else ""
    return f"""apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {name}{annotations}
spec:
  replicas: 1
  selector: {{matchLabels: {{tier: {name}}}}}
  template:
    metadata: {{labels: {{tier: {name}}}}}
    spec:
      containers: [{{name: main, image: "registry.k8s.io/pause:3.10"}}]
"""


def suspended_job(name: str, command: str, annotations: str = "") -> str:
    """A suspended Job (no pod needed): its template cannot change once created."""
    annotated = f"  annotations:\n    {annotations}\n" if annotations else ""
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n{annotated}"
        "spec:\n  suspend: true\n  template:\n    spec:\n      restartPolicy: Never\n"
        f"      containers:\n        - name: main\n          image: busybox\n"
        f"          command: [{command}]\n"
    )


WIDGETS = {
    "crd.yaml": """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gauges.health.example.com
spec:
  group: health.example.com
  names: {kind: Gauge, plural: gauges, singular: gauge}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
""",
    "gauge.yaml": """apiVersion: health.example.com/v1
kind: Gauge
metadata:
  name: pressure
spec:
  size: 3
""",
}
"""A custom resource no controller serves, and its CRD."""

HELLO_CHART = {
    "hello/Chart.yaml": "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
    "hello/values.yaml": "greeting: hello\n",
    "hello/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-hello\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    ),
}
"""A chart in folder hello/: one ConfigMap, <release>-hello, holding the greeting value."""


def under(folder: str, files: dict[str, str]) -> dict[str, str | None]:
    return {f"{folder}/{path}": text for path, text in files.items()}


def folder(at: Path, *names: str, **extra: str) -> Path:
    """A directory of ConfigMaps (none naming its namespace), and `extra` files."""
    at.mkdir(parents=True, exist_ok=True)
    for old in at.rglob("*.yaml"):
        old.unlink()
    for name in names:
        (at / f"{name}.yaml").write_text(CONFIG_MAP.format(name=name))
    for relative, text in extra.items():
        (at / relative).parent.mkdir(parents=True, exist_ok=True)
        (at / relative).write_text(text)
    return at


def write(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root
