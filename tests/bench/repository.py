"""The repositories the benchmark syncs: N objects in plain YAML, one file per app.

Each app is a Deployment, a Service, a ConfigMap and a Widget (a custom resource), in one
of NAMESPACES namespaces; the Namespaces and the Widgets' CRD are in the repository too.
Every set of objects has a tag that names its namespaces and its CRD's group, so each
tool and each run starts from nothing the cluster has seen: a cold sync is really cold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.harness.gitserver import GitRepo, GitServer, git

NAMESPACES = 10
OBJECTS_PER_APP = 4
SEED = "bench"
"""The ConfigMaps' `mode` in git: an out-of-band edit changes it, a heal brings it back."""


@dataclass(frozen=True)
class ObjectSet:
    """The files of one set: `size` objects whose names all carry `tag`."""

    tag: str
    size: int
    files: dict[str, str]

    @property
    def namespaces(self) -> list[str]:
        return [f"{self.tag}-{index:02d}" for index in range(NAMESPACES)]

    @property
    def group(self) -> str:
        return f"{self.tag}.bench.gitopsd.test"

    @property
    def crd(self) -> str:
        return f"widgets.{self.group}"

    @property
    def apps(self) -> int:
        return (self.size - NAMESPACES - 1) // OBJECTS_PER_APP

    def app(self, index: int) -> tuple[str, str]:
        """The namespace and name of app `index` (its ConfigMap has the same name)."""
        return self.namespaces[index % NAMESPACES], f"app-{index:05d}"

    def app_file(self, index: int) -> str:
        namespace, name = self.app(index)
        return f"apps/{namespace}/{name}.yaml"

    def app_manifests(self, index: int, revision: str = "0") -> str:
        """App `index`'s file; `revision` is its ConfigMap's `rev` (a commit changes it)."""
        namespace, name = self.app(index)
        return "---\n".join(
            (
                deployment(namespace, name),
                service(namespace, name),
                config_map(namespace, name, revision),
                widget(self.group, namespace, name, index),
            )
        )


def generate(tag: str, size: int) -> ObjectSet:
    """Exactly `size` objects: the Namespaces, the CRD, whole apps, then ConfigMaps to fill."""
    empty = ObjectSet(tag, size, {})
    if empty.apps < 1:
        raise ValueError(f"a set needs at least {NAMESPACES + 1 + OBJECTS_PER_APP} objects")
    files = {
        "cluster/namespaces.yaml": "---\n".join(namespace_object(n) for n in empty.namespaces),
        "cluster/crd.yaml": widget_crd(empty.group),
    }
    files.update({empty.app_file(i): empty.app_manifests(i) for i in range(empty.apps)})
    filler = (size - NAMESPACES - 1) % OBJECTS_PER_APP
    if filler:
        first = empty.namespaces[0]
        files[f"apps/{first}/filler.yaml"] = "---\n".join(
            config_map(first, f"filler-{index}", "0") for index in range(filler)
        )
    return ObjectSet(tag, size, files)


def write(objects: ObjectSet, root: Path) -> Path:
    for relative, text in objects.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def git_repository(server: GitServer, objects: ObjectSet) -> GitRepo:
    """A bare repository holding the set in one commit, and the clone that later commits
    come from."""
    repo = server.create_repo(objects.tag)
    write(objects, repo.work)
    git("add", "-A", cwd=repo.work)
    git("commit", "-q", "-m", f"{objects.size} objects", cwd=repo.work)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=repo.work)
    return repo


def namespace_object(name: str) -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"


def deployment(namespace: str, name: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app: {name}, tier: bench}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}, tier: bench}}
    spec:
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          ports: [{{name: http, containerPort: 8080}}]
          envFrom: [{{configMapRef: {{name: {name}}}}}]
          resources:
            requests: {{cpu: 10m, memory: 16Mi}}
            limits: {{memory: 64Mi}}
"""


def service(namespace: str, name: str) -> str:
    return f"""apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app: {name}, tier: bench}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: http, port: 80, targetPort: http}}]
"""


def config_map(namespace: str, name: str, revision: str) -> str:
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app: {name}, tier: bench}}
data:
  mode: {SEED}
  rev: "{revision}"
  greeting: hello from {name}
"""


def widget(group: str, namespace: str, name: str, index: int) -> str:
    return f"""apiVersion: {group}/v1
kind: Widget
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app: {name}, tier: bench}}
spec:
  size: {index % 10}
  color: {("red", "green", "blue")[index % 3]}
"""


def widget_crd(group: str) -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{type: integer}}
                color: {{type: string}}
"""
