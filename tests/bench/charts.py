"""A chart, side by side: what rendering costs gitopsd against helm itself, and a sync of
the chart against `helm template | kubectl apply --server-side` (what a tool without release
storage does), each on a release of its own. Then whether a poll whose commit left the chart
alone renders it again (it must not).

The chart renders N objects from one template loop: N/4 apps of a Deployment, a Service and
two ConfigMaps, in a Namespace the chart carries.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd import manifests, source
from gitopsd.config import SourceSpec
from gitopsd.reconcile.desired import read_revision
from tests.bench.lab import Command, Lab
from tests.bench.measure import Figure
from tests.harness.gitserver import GitRepo, git

RENDER, COLD, NOOP_SYNC = "render", "cold sync", "no-op sync"
PHASES = (RENDER, COLD, NOOP_SYNC)


@dataclass
class ChartFigures:
    """One run's figures: (phase, tool) -> its figure; and the renders of a no-op poll."""

    figures: dict[tuple[str, str], Figure] = field(default_factory=dict)
    renders_on_poll: int = 0


NO_DRIFT = (0,)

TEMPLATE = """{{- range $i := until (int .Values.apps) }}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-{{ $i }}, namespace: {{ $.Release.Namespace }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: app-{{ $i }}}}
  template:
    metadata: {labels: {app: app-{{ $i }}}}
    spec:
      containers: [{name: app, image: "registry.k8s.io/pause:3.10"}]
---
apiVersion: v1
kind: Service
metadata: {name: app-{{ $i }}, namespace: {{ $.Release.Namespace }}}
spec:
  selector: {app: app-{{ $i }}}
  ports: [{port: 80}]
{{- range $part := list "settings" "features" }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-{{ $i }}-{{ $part }}, namespace: {{ $.Release.Namespace }}}
data: {revision: {{ $.Values.revision | quote }}, index: "{{ $i }}"}
{{- end }}
{{- end }}
"""


def chart_files(size: int) -> dict[str, str]:
    return {
        "chart/Chart.yaml": "apiVersion: v2\nname: bench\nversion: 0.1.0\n",
        "chart/values.yaml": f"apps: {size // 4}\nrevision: '0'\n",
        "chart/templates/namespace.yaml": (
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: {{ .Release.Namespace }}}\n"
        ),
        "chart/templates/apps.yaml": TEMPLATE,
    }


def side_by_side(lab: Lab, size: int, tag: str) -> ChartFigures:
    repo = lab.server.create_repo(f"{tag}-chart")
    _commit(repo, chart_files(size), f"a chart of {size} objects")
    url, chart = lab.server.file_url(repo), str(repo.work / "chart")
    ours, theirs = f"{tag}-chart-g", f"{tag}-chart-h"

    def gitopsd(command: str) -> list[str]:
        return [*lab.gitopsd(command, url, ours), "--path", "chart", "--namespace", ours]

    helm = [str(lab.binaries.helm), "template", ours, chart, "--namespace", theirs]
    kubectl = lab.kubectl("apply", "--server-side", "-f", "-", cache=theirs)
    pipe = f"{shlex.join(helm)} | {shlex.join(kubectl)}"
    cache = str(lab.workdir / "gitopsd-cache" / f"{ours}-validate")
    validate = [*lab.gitopsd("validate", url, ours)[:6], "--path", "chart", "--cache-dir", cache]
    sync: list[Command] = [(gitopsd("sync"), NO_DRIFT)]
    applied: list[Command] = [(["bash", "-o", "pipefail", "-c", pipe], NO_DRIFT)]
    commands: dict[str, tuple[list[Command], list[Command]]] = {
        RENDER: ([(validate, NO_DRIFT)], [(helm, NO_DRIFT)]),
        COLD: (sync, applied),
        NOOP_SYNC: (sync, applied),
    }
    result = ChartFigures()
    for phase in PHASES:
        for tool, run in zip(("gitopsd", "helm"), commands[phase], strict=True):
            label = f"{tag}-chart-{tool}-{phase.replace(' ', '-')}"
            result.figures[phase, tool] = figure = lab.measured(label, run, 120.0 + 0.1 * size)
            print(f"  chart {phase:<10} {tool:<8} {figure.seconds:8.2f} s", flush=True)
    result.renders_on_poll = renders_of_a_poll(repo, url, lab.workdir / "poll-cache" / tag)
    print(f"  chart: a poll that left the chart alone rendered {result.renders_on_poll} times")
    return result


def renders_of_a_poll(repo: GitRepo, url: str, cache: Path) -> int:
    """Reads the chart's revision, commits a file beside it, reads again: the renders the
    second read made (the parse cache counts them)."""
    spec = dataclasses.replace(SourceSpec(url=url, allow_insecure=True), paths=("chart",))
    parses = manifests.ParseCache()
    read_revision(source.fetch(spec, cache), spec, cache, parses)
    before = parses.parses
    _commit(repo, {"README.md": "the chart is untouched\n"}, "a commit beside the chart")
    read_revision(source.fetch(spec, cache), spec, cache, parses)
    return parses.parses - before


def _commit(repo: GitRepo, files: dict[str, str], message: str) -> None:
    for relative, text in files.items():
        path = repo.work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git("add", "-A", cwd=repo.work)
    git("commit", "-q", "-m", message, cwd=repo.work)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=repo.work)
