"""The shipped install (config/), moved into a test's namespace by a kustomize overlay, the
way a user adapts it, and applied with the real kubectl."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.harness.cli import Gitopsd

CONFIG = Path(__file__).resolve().parents[2] / "config"
SHIPPED_NAMESPACE = "gitopsd-system"
ACCOUNT = "gitopsd"


def moved_to(namespace: str) -> dict[str, Any]:
    """The transformer docs/install.md "Install into a cluster" names: a kustomization's
    `namespace:` field moves the bindings' ServiceAccount subjects only where they say
    "default", so this one, run after it, moves them all."""
    return {
        "apiVersion": "builtin",
        "kind": "NamespaceTransformer",
        "metadata": {"name": "namespace", "namespace": namespace},
        "setRoleBindingSubjects": "allServiceAccounts",
        "unsetOnly": False,
    }


@dataclass(frozen=True)
class Install:
    """config/<component> as an overlay that puts every namespaced object into `namespace`
    and suffixes every name with it, so tests running side by side never share a
    ClusterRole or binding."""

    gitopsd: Gitopsd
    component: str
    namespace: str
    directory: Path

    @classmethod
    def of(cls, gitopsd: Gitopsd, component: str, namespace: str, workdir: Path) -> Install:
        directory = workdir / f"overlay-{component}"
        directory.mkdir(parents=True, exist_ok=True)
        overlay = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": namespace,  # renames the shipped Namespace too
            "nameSuffix": f"-{namespace}",
            "resources": [os.path.relpath(CONFIG / component, directory)],
            "transformers": [yaml.safe_dump(moved_to(namespace))],  # inline, as YAML text
        }
        (directory / "kustomization.yaml").write_text(json.dumps(overlay))
        return cls(gitopsd, component, namespace, directory)

    @property
    def account(self) -> str:
        """The ServiceAccount's name after the overlay's suffix."""
        return f"{ACCOUNT}-{self.namespace}"

    def objects(self) -> list[dict[str, Any]]:
        """What `kubectl kustomize` renders, in order."""
        rendered = self.gitopsd.kubectl("kustomize", str(self.directory))
        return [doc for doc in yaml.safe_load_all(rendered) if doc]

    def apply(self, *flags: str) -> str:
        return self.gitopsd.kubectl("apply", "--server-side", *flags, "-k", str(self.directory))

    def kubectl_as(self, token: str, *arguments: str) -> subprocess.CompletedProcess[str]:
        """kubectl with only `token` as credentials (never raising: callers read the result)."""
        plane = self.gitopsd.plane
        return subprocess.run(
            [
                str(self.gitopsd.binaries.kubectl),
                f"--server={plane.url}",
                f"--certificate-authority={plane.ca_file}",
                f"--token={token}",
                *arguments,
            ],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.directory)},
        )
