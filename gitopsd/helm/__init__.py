"""Renders a chart directory with `helm template`, then hands on manifests like any others.

A chart is hostile input like the rest of the repository (docs/ARCHITECTURE.md, Trust
boundaries): helm follows symlinks, unpacks archives, runs plugins and post-renderers, reads
its repository and registry settings from its home, and fetches what a chart depends on.
So each render first checks the chart (`chart.inspect`: every file it holds, its archives
bounded, its `file://` dependencies inside the checkout), then copies exactly those bytes into
a private directory (the dependencies placed under `charts/`, as `helm dependency build`
would: `file://` ones from the checkout, others fetched by gitopsd, `fetch`, at the version
Chart.lock pins or the highest their range allows, checked and unpacked like a chart
source), and runs helm by absolute path in the renderers' sandbox (`sandbox`: no network at
all, an empty private home and helm directories, so no plugin, repository or registry
exists; output and time bounded). No post-renderer is ever passed. A library chart renders
nothing (it has nothing of its own to install). `.Capabilities` is the
cluster's: its version and every group/version and group/version/kind it serves; `lookup`
finds nothing, as in `helm template` everywhere. Chart tests are left out; hooks are
rendered, and run as gitopsd's own (`gitopsd.synchooks` maps `helm.sh/hook`).

helm writes each document under a `# Source:` line; the documents are split on those lines
(`output`), so a manifest's origin is the template it came from. Every string of the values
given (values files and inline values; not the chart's own defaults, which are the chart's
public text) is scrubbed from helm's errors: a template's `fail` or `required` may quote a
password. A render is known by a fingerprint of everything it reads (the git blob of each
file, the values, the release, the cluster's capabilities, the helm binary), so a revision
that changed nothing of the chart renders nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gitopsd import sandbox
from gitopsd.config import ChartInflation, ChartSettings, Limits
from gitopsd.errors import ConfigError, ManifestError, ManifestReason
from gitopsd.helm import output
from gitopsd.helm.chart import Chart, RemoteDependency, inspect, values_file
from gitopsd.manifests import (
    CHART_FILE,
    ChartRender,
    Directory,
    Tree,
    child_path,
    parse_documents,
)

FLAGS = ("--include-crds", "--skip-tests")
FetchDependency = Callable[[RemoteDependency], Path]
"""Fetches a dependency from its chart repository or registry: the unpacked chart."""
VALUES_SETTING = "helm valuesFiles"
_MAX_VALUES_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Capabilities:
    """What `.Capabilities` tells a chart about the cluster it renders for."""

    kube_version: str
    api_versions: tuple[str, ...]

    def flags(self) -> list[str]:
        flags = ["--kube-version", self.kube_version] if self.kube_version else []
        if self.api_versions:
            flags += ["--api-versions", ",".join(self.api_versions)]
        return flags


_HELMS_DEFAULTS = Capabilities("", ())
"""No cluster to ask (`gitopsd validate`): helm's own defaults."""


class Charts:
    """Renders each chart directory of a source with the source's chart settings."""

    def __init__(
        self,
        helm: Path,
        settings: ChartSettings,
        namespace: str,
        capabilities: Callable[[], Capabilities] | None,
        fetch: FetchDependency,
        tenant: str,
    ) -> None:
        self.helm, self.settings, self.fetch, self.tenant = helm, settings, fetch, tenant
        """`tenant`: the namespace of the source, whose renders share the render slots."""
        self.namespace = settings.namespace or namespace
        self.capabilities = cache(capabilities) if capabilities else None
        """Read when a chart renders, and once: a revision without charts costs nothing."""

    def __call__(self, tree: Tree, rel: str, limits: Limits) -> ChartRender:
        """The chart in `rel`, checked once (its files walked, its archives bounded): what
        its render depends on, and the render, which a fingerprint already rendered saves."""
        chart, values = self._inspect(tree, rel, limits)

        def render(max_bytes: int) -> list[tuple[str, str]]:
            return self._render(tree, chart, values, limits, max_bytes)

        return ChartRender(self._fingerprint(tree, chart, values), render)

    def _fingerprint(self, tree: Tree, chart: Chart, values: list[str]) -> str | None:
        """What the render of `chart` depends on, or None when a file's content id is
        unknown (a directory read in place): then it renders every time."""
        contents = [(path, tree.content_id(path)) for path in [*chart.every_file(), *values]]
        if any(content is None for _, content in contents):
            return None
        binary = self.helm.stat()
        facts = [
            [str(self.helm), binary.st_size, binary.st_mtime_ns],
            [chart.rel, self._release(chart), self.namespace, self.settings.values],
            [*self.settings.values_files],
            self._capabilities().flags(),
            contents,
        ]
        return hashlib.sha256(json.dumps(facts).encode()).hexdigest()

    def _render(
        self, tree: Tree, chart: Chart, values: list[str], limits: Limits, max_bytes: int
    ) -> list[tuple[str, str]]:
        """The rendered documents of `chart`, as (template path, YAML) pieces."""
        if chart.library:  # helm would refuse to install it: it renders nothing of its own
            return []
        root = tree.materialized(sorted({*chart.every_file(), *values}))
        secrets = list(_values_strings(tree, values, self.settings.values, limits))
        job = _Job(chart, root, [root / path for path in values], self.settings.values, FLAGS)
        text = self._template(job, self.namespace, self._release(chart), secrets, max_bytes)
        return output.pieces(text, chart.rel)

    def inflate(self, tree: Tree, inflation: ChartInflation, limits: Limits, max_bytes: int) -> str:
        """The YAML a kustomization's `helmCharts` entry inflates to: its chart, of the
        revision or fetched, rendered with the entry's values and flags."""
        where = inflation.where
        values = [values_file(tree, ".", path, where) for path in inflation.values_files]
        if inflation.chart is None:
            remote = RemoteDependency(inflation.name, inflation.repository, inflation.version)
            chart_root = self._fetched(where, remote)
            chart = inspect(Directory(chart_root), ".", limits)
        else:
            chart = inspect(tree, _chart_at_home(tree, inflation), limits)
            chart_root = tree.materialized(sorted(chart.every_file()))
        if chart.library:
            return ""
        values_root = tree.materialized(values) if values else chart_root
        settings = inflation.settings
        secrets = list(_values_strings(tree, values, settings.values, limits))
        flags = ["--skip-tests"]
        flags += ["--include-crds"] if inflation.include_crds else []
        flags += ["--no-hooks"] if inflation.skip_hooks else []
        job = _Job(
            chart, chart_root, [values_root / path for path in values], settings.values, flags
        )
        namespace = settings.namespace or self.namespace
        release = settings.release_name or inflation.name
        return self._template(job, namespace, release, secrets, max_bytes)

    def _template(
        self, job: _Job, namespace: str, release: str, secrets: list[str], max_bytes: int
    ) -> str:
        """`helm template` of a private copy of the chart, in the sandbox."""
        what = f"{job.chart.rel}: helm template"
        with tempfile.TemporaryDirectory(prefix="gitopsd-chart-") as work:
            copy = Path(work) / "chart"
            self._copy(job.root, job.chart, copy)
            program = [str(self.helm), "template", *job.flags, "--namespace", namespace]
            program += self._capabilities().flags()
            program += [flag for path in job.values for flag in ("--values", str(path))]
            program += _inline_values(job.inline, Path(work))
            program += ["--", release, str(copy)]
            reads = [Path(work), *job.values]  # the chart's copy, inline values; values files
            finished = sandbox.run(
                program, max_bytes, _settings, what, reads, self.tenant, cwd=Path(work)
            )
            return sandbox.output_of(finished, what, max_bytes, secrets, Path(work))

    def _copy(self, root: Path, chart: Chart, to: Path) -> None:
        """The chart's files, its `file://` dependencies under its `charts/`, and those of
        a chart repository or registry as fetched (as `helm dependency build` would)."""
        for rel in chart.files:
            target = to / Path(rel).relative_to(chart.rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, target, follow_symlinks=False)
        for dependency in chart.dependencies:
            self._copy(root, dependency.chart, to / "charts" / dependency.name)
        for remote in chart.remote:
            where = f"{child_path(chart.rel, CHART_FILE)}: dependency {remote.name}"
            fetched = self._fetched(where, remote)
            shutil.copytree(fetched, to / "charts" / remote.name, symlinks=True)

    def _fetched(self, where: str, remote: RemoteDependency) -> Path:
        try:
            return self.fetch(remote)
        except ConfigError as error:
            raise ManifestError(f"{where}: {error}") from None
        except ManifestError as error:  # over the budget its revision's dependencies share
            raise ManifestError(f"{where}: {error}", error.reason) from None

    def _inspect(self, tree: Tree, rel: str, limits: Limits) -> tuple[Chart, list[str]]:
        chart = inspect(tree, rel, limits)
        files = self.settings.values_files
        return chart, [values_file(tree, rel, entry, VALUES_SETTING) for entry in files]

    def _capabilities(self) -> Capabilities:
        return self.capabilities() if self.capabilities else _HELMS_DEFAULTS

    def _release(self, chart: Chart) -> str:
        """The release name set, else the chart's directory's (the root's: the chart's)."""
        return self.settings.release_name or (
            Path(chart.rel).name if chart.rel != "." else chart.name
        )


@dataclass(frozen=True)
class _Job:
    """What one `helm template` renders: the chart (its files under `root`), values files
    (absolute paths, later ones win), inline values (JSON) and helm's flags."""

    chart: Chart
    root: Path
    values: list[Path]
    inline: str
    flags: Sequence[str]


def _inline_values(values: str, work: Path) -> list[str]:
    if not values:
        return []
    path = work / "inline-values.json"
    path.write_text(values)
    return ["--values", str(path)]


def renderer(
    settings: ChartSettings,
    namespace: str,
    capabilities: Callable[[], Capabilities] | None,
    fetch: FetchDependency,
    tenant: str,
) -> Charts | None:
    """A chart renderer when helm is on PATH, else None (a chart is then an error); its
    renders take their slots as `tenant`'s (`sandbox.slots`)."""
    helm = shutil.which("helm")
    if helm is None:
        return None
    return Charts(Path(helm).resolve(), settings, namespace, capabilities, fetch, tenant)


def _settings(home: Path) -> dict[str, str]:
    """helm's own directories, private and empty: no plugin, repository, registry login or
    kubeconfig is found, whatever the machine holds."""
    helm = home / "helm"
    for directory in ("cache", "config", "data", "plugins"):
        (helm / directory).mkdir(parents=True)
    return {
        "HELM_CACHE_HOME": str(helm / "cache"),
        "HELM_CONFIG_HOME": str(helm / "config"),
        "HELM_DATA_HOME": str(helm / "data"),
        "HELM_PLUGINS": str(helm / "plugins"),
        "HELM_REGISTRY_CONFIG": str(helm / "config/registry.json"),
        "HELM_REPOSITORY_CONFIG": str(helm / "config/repositories.yaml"),
        "HELM_REPOSITORY_CACHE": str(helm / "cache/repository"),
        "KUBECONFIG": str(home / "no-kubeconfig"),
    }


def _values_strings(tree: Tree, files: Sequence[str], inline: str, limits: Limits) -> Iterator[str]:
    """Every string the values hold: helm's errors must never show one."""
    for path in files:
        if tree.size(path) > _MAX_VALUES_BYTES:
            raise ManifestError(
                f"{path}: over the limit of {_MAX_VALUES_BYTES} bytes for a values file",
                ManifestReason.SIZE_LIMIT,
            )
        data = tree.read(path, _MAX_VALUES_BYTES).decode("utf-8", errors="replace")
        for _, document in parse_documents(data, path, limits):
            yield from _leaves(document)
    if inline:
        yield from _leaves(json.loads(inline))


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str):
        yield value


def _chart_at_home(tree: Tree, inflation: ChartInflation) -> str:
    """The chart directory a helmCharts entry names, once it is there: kustomize looks for
    it under helmGlobals.chartHome, which a chart kept elsewhere needs set."""
    assert inflation.chart is not None  # noqa: S101 - a chart of the revision
    if tree.mode(f"{inflation.chart}/{CHART_FILE}") is None:
        home = inflation.chart.rpartition("/")[0] or "."
        raise ManifestError(
            f"{inflation.where}: no chart {inflation.name} in {home}/ (helmGlobals.chartHome, "
            "default charts, is where a kustomization's charts are, from its directory; or "
            "`repo` fetches the chart)"
        )
    return inflation.chart
