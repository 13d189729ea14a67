"""Renders a kustomization directory with `kubectl kustomize` (kubectl carries kustomize).

The repository is hostile (docs/ARCHITECTURE.md, Trust boundaries), and kubectl and
kustomize read more than the kustomization: kubectl reads `$HOME/.kube/kuberc`, whose
defaults can switch on exec plugins or point `--helm-command` at a program; kustomize runs
plugins from `$XDG_CONFIG_HOME/kustomize/plugin`, fetches remote bases and files, and loads
any directory it is pointed at. So each render first checks every path the kustomizations reach
(`references.check`) and has the tree write what they reach into a private copy (a
local directory is its own): the very bytes checked, straight from git's object store.
Then it runs kubectl by absolute path on that copy in the renderers' sandbox (`sandbox`:
no network at all, an empty private home, output and time bounded, errors scrubbed), with
kuberc off, and plugins and helm switched off by flag. Its output counts against the
revision's byte budget while it is read, and its errors lose every generator value before
anyone sees them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gitopsd import sandbox
from gitopsd.config import Limits
from gitopsd.kustomize import references
from gitopsd.manifests import Render, Tree

HARDENING_FLAGS = (
    "--enable-alpha-plugins=false",  # no exec or container plugins, no KRM functions
    "--enable-helm=false",  # no helm binary, wherever --helm-command would point
    "--load-restrictor=LoadRestrictionsRootOnly",  # files only from a kustomization's own dir
)


def renderer() -> Render | None:
    """A render function when kubectl is on PATH, else None (a kustomization is then an error)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    found = str(Path(kubectl).resolve())
    return lambda tree, rel, limits, max_bytes: render(found, tree, rel, limits, max_bytes)


def render(kubectl: str, tree: Tree, rel: str, limits: Limits, max_bytes: int) -> str:
    """The rendered YAML of the kustomization in directory `rel` of the revision's `tree`.

    Raises ManifestError when it reaches outside the revision or past `limits`, when
    kustomize fails, takes too long, or writes more than `max_bytes` (what is left of the
    revision's byte limit).
    """
    reach = references.check(tree, rel, limits)
    root = tree.materialized(sorted(reach.paths))
    program = [kubectl, "kustomize", *HARDENING_FLAGS, "--", str(root / rel)]
    finished = sandbox.run(program, max_bytes, _settings, f"{rel}: kustomize")
    return sandbox.output_of(finished, f"{rel}: kustomize", max_bytes, reach.secrets, root)


def _settings(home: Path) -> dict[str, str]:
    return {"KUBECTL_KUBERC": "false"}  # no kuberc, so no defaults that switch plugins back on
