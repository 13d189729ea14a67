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
anyone sees them. A kustomization's `helmCharts` are rendered by gitopsd's own chart
renderer instead, and handed to kustomize as resources (`helm_charts`).
"""

from __future__ import annotations

import posixpath
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from gitopsd import sandbox
from gitopsd.config import ChartInflation, Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.kustomize import helm_charts, references
from gitopsd.manifests import Render, Tree, copy_paths

HARDENING_FLAGS = (
    "--enable-alpha-plugins=false",  # no exec or container plugins, no KRM functions
    "--enable-helm=false",  # no helm binary, wherever --helm-command would point
    "--load-restrictor=LoadRestrictionsRootOnly",  # files only from a kustomization's own dir
)


Inflate = Callable[[Tree, ChartInflation, Limits, int], str]
"""Renders the chart of a `helmCharts` entry: its YAML (gitopsd's chart renderer)."""


def renderer(inflate: Inflate | None, tenant: str) -> Render | None:
    """A render function when kubectl is on PATH, else None (a kustomization is then an
    error); `inflate` renders `helmCharts` (None: helm is missing, and they are an error).
    Its renders take their slots as `tenant`'s (`sandbox.slots`)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    found = str(Path(kubectl).resolve())
    return lambda tree, rel, limits, max_bytes: render(
        found, tree, rel, limits, max_bytes, inflate, tenant
    )


def render(
    kubectl: str,
    tree: Tree,
    rel: str,
    limits: Limits,
    max_bytes: int,
    inflate: Inflate | None,
    tenant: str,
) -> str:
    """The rendered YAML of the kustomization in directory `rel` of the revision's `tree`.

    Raises ManifestError when it reaches outside the revision or past `limits`, when
    kustomize fails, takes too long, or writes more than `max_bytes` (what is left of the
    revision's byte limit).
    """
    reach = references.check(tree, rel, limits)
    root = tree.materialized(sorted(reach.paths))
    if not reach.inflating:
        return _kustomize(kubectl, root, rel, max_bytes, reach.secrets, tenant)
    with tempfile.TemporaryDirectory(prefix="gitopsd-kustomize-") as work:
        copy = _private_copy(root, reach.paths, Path(work))
        for kustomization in reach.inflating:
            _inflate(tree, kustomization, copy, limits, max_bytes, inflate)
        return _kustomize(kubectl, copy, rel, max_bytes, reach.secrets, tenant)


def _kustomize(
    kubectl: str, root: Path, rel: str, max_bytes: int, secrets: list[str], tenant: str
) -> str:
    program = [kubectl, "kustomize", *HARDENING_FLAGS, "--", str(root / rel)]
    finished = sandbox.run(program, max_bytes, _settings, f"{rel}: kustomize", [root], tenant)
    return sandbox.output_of(finished, f"{rel}: kustomize", max_bytes, secrets, root)


def _private_copy(root: Path, paths: set[str], work: Path) -> Path:
    """What kustomize may read, copied, so that the kustomizations can be rewritten: the
    tree's own snapshot (or a directory read in place) is left as it is."""
    copy = work / "copy"
    copy_paths(root, paths, copy)
    return copy


def _inflate(
    tree: Tree,
    kustomization: references.Inflating,
    copy: Path,
    limits: Limits,
    max_bytes: int,
    inflate: Inflate | None,
) -> None:
    """Renders the kustomization's charts into files beside it, and rewrites it to read
    them as resources instead of inflating `helmCharts` itself."""
    if inflate is None:
        raise ManifestError(
            f"{kustomization.file}: helmCharts need helm, which is not on PATH",
            ManifestReason.INVALID,
        )
    generated = []
    for at, chart in enumerate(kustomization.charts):
        path = helm_charts.generated_file(kustomization.directory, at, chart.name)
        (copy / path).write_text(inflate(tree, chart, limits, max_bytes))
        generated.append(posixpath.basename(path))
    data = helm_charts.without_charts(kustomization.data, generated)
    (copy / kustomization.file).write_text(yaml.safe_dump(data, sort_keys=False))


def _settings(home: Path) -> dict[str, str]:
    return {"KUBECTL_KUBERC": "false"}  # no kuberc, so no defaults that switch plugins back on
