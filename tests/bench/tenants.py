"""Tenants: one namespace at its bounds, and another's heal latency. One daemon
in operator mode, inside a 1 GiB memory cgroup as the Deployment's limit, serves a victim
namespace (a GitSync of a few dozen ConfigMaps, selfHeal) and an attacker's. The victim's
out-of-band edit -> heal latency is measured twice in one run: with the attacker's
namespace empty, then with it at every bound the configuration gives it, at its defaults:

- as many GitSyncs as `tenantQuota.gitSyncs` allows (one more is refused, naming it);
- one of them holds a revision of nearly `tenantQuota.objects` ConfigMaps, in observe mode,
  dry-run at each commit as fast as `tenantQuota.requestsPerSecond` lets it;
- one fetches a chart from a server that trickles a byte every half second, until
  `network.fetchDeadline` (20 s here, so that each fetch ends and starts again in the run),
  holding one of the namespace's `tenantQuota.threads`;
- one applies a few ConfigMaps that each commit changes, each assessed by a health rule of
  half a second, more than `tenantQuota.healthRuleSecondsPerMinute` lets it take (the
  victim has a rule of its own, so its heals ask the same evaluator);
- the rest render a chart that grows a string until `sandbox.renderMemory` stops it;
- the attacker commits to its charts every few seconds, so that they render again.

Measured on a bare control plane of its own by `make bench` (--tenants); alone:

    python -m tests.bench.tenants [--edits 60]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from gitopsd.sandbox_bounds import SandboxBounds
from tests.bench import attacker
from tests.bench.fleet import GROUP, PLURAL, VERSION, install_crd
from tests.bench.measure import BenchError, percentile, seconds_until, tail
from tests.harness import audit
from tests.harness.controlplane import (
    AUDITED_USER,
    Binaries,
    ControlPlane,
    provide_binaries,
    running_control_plane,
)
from tests.harness.daemon import DaemonProcess
from tests.harness.gitserver import GitServer
from tests.harness.kube import api_client
from tests.harness.trickle import Trickle, serving

VICTIM, ATTACKER = "victim", "attacker"
VICTIM_OBJECTS = 40
VICTIM_RULE = {"apiVersion": "v1", "kind": "ConfigMap", "current": "has(data.value)"}
"""The victim's own health rule: each heal's reconcile asks the evaluator the attacker's
slow rules keep busy."""
MEMORY_LIMIT_MIB = 1024
"""The shipped Deployment's memory limit."""
FETCH_DEADLINE_SECONDS = 20
ATTACKER_INTERVAL = "2s"
HEAL_DEADLINE_SECONDS = 30.0
EDIT_SPACING_SECONDS = 2.0
"""Edits start this far apart, in both phases: 20 span two fetch deadlines and eight of the
attacker's commits, so the victim is measured while the attacker works, not between."""
WITHIN = 1.10
"""The target: the victim's heal latency at most 10 % more with the attacker at its bounds."""
SANDBOX = SandboxBounds()


@dataclass
class TenantFigures:
    edits: int
    idle: list[float | None] = field(default_factory=list)
    """The victim's edit -> heal, in seconds, with the attacker's namespace empty."""
    loaded: list[float | None] = field(default_factory=list)
    """The same, with the attacker at its bounds (None: not healed within the deadline)."""
    gitsyncs: int = 0
    """The attacker's GitSyncs served; one more was refused naming tenantQuota.gitSyncs."""
    held_objects: int = 0
    renders_over_memory: int = 0
    """The attacker's GitSyncs whose last revision failed at sandbox.renderMemory."""
    fetches: int = 0
    """Connections the trickling chart server took while the victim was measured."""
    attacker_reasons: Counter[str] = field(default_factory=Counter)
    """The attacker's GitSyncs by their Ready reason at the end."""
    attacker_rate: float = 0.0
    """API requests a second the attacker's GitSyncs sent while the victim was measured."""
    rule_waits: int = 0
    """Times the attacker's health rules waited for its share of the rules' evaluator."""
    commits: int = 0
    """The attacker's commits while the victim was measured."""
    attacker_polls: Counter[str] = field(default_factory=Counter)
    """The attacker's reconciles by result while the victim was measured."""
    peak_mib: float = 0.0
    oom_kills: int = 0
    cage: str = ""


def main() -> int:
    options = _parser().parse_args()
    binaries = provide_binaries()
    # the daemon renders the attacker's charts with helm, found on PATH as in the image
    os.environ["PATH"] = f"{binaries.helm.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    with tempfile.TemporaryDirectory(prefix="gitopsd-tenants-") as temporary:
        try:
            figures = measure_tenants(binaries, Path(temporary), options.edits)
        except BenchError as error:
            print(f"tenants: error: {error}", file=sys.stderr)
            return 1
    print(table(figures))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.tenants", description=__doc__)
    parser.add_argument("--edits", type=int, default=60, help="edits timed in each phase (60)")
    return parser


def measure_tenants(binaries: Binaries, workdir: Path, edits: int) -> TenantFigures:
    print(f"bench: tenants, {edits} edits a phase, work in {workdir}", flush=True)
    workdir.mkdir(parents=True, exist_ok=True)
    with (
        running_control_plane(binaries, workdir / "cluster", with_controllers=False) as plane,
        serving(Trickle()) as trickle,
    ):
        trickle.trickling.set()
        (workdir / "git").mkdir()
        tenants = Tenants(plane, GitServer(root=workdir / "git"), workdir, trickle)
        try:
            return tenants.measure(edits)
        finally:
            tenants.daemon.stop()


class Tenants:
    def __init__(self, plane: ControlPlane, server: GitServer, workdir: Path, trickle: Trickle):
        self.plane, self.server, self.trickle = plane, server, trickle
        self.api = api_client(plane)
        self.core: Any = client.CoreV1Api(self.api)
        self.objects: Any = client.CustomObjectsApi(self.api)
        self.victim_repo = server.create_repo("victim")
        self.victim_repo.commit(victim_manifests())
        self.attacker_repo = server.create_repo("attacker")
        self.attacker_repo.commit(attacker.charts(churn=0))
        settings = {"enabled": True, "namespaces": [VICTIM, ATTACKER], "allowInsecure": True}
        self.daemon = DaemonProcess.configured(
            workdir,
            "tenants",
            AUDITED_USER,
            plane.audited_kubeconfig,
            [],
            gitSyncs=settings,
            network={"fetchDeadline": f"{FETCH_DEADLINE_SECONDS}s"},
        )
        self.daemon.memory_limit_mib = MEMORY_LIMIT_MIB

    def measure(self, edits: int) -> TenantFigures:
        figures = TenantFigures(edits)
        install_crd(self.api)
        for namespace in (VICTIM, ATTACKER):
            self.core.create_namespace({"metadata": {"name": namespace}})
        self.daemon.start()
        spec = {"repository": {"url": self.server.file_url(self.victim_repo)}, "interval": "1h"}
        self.create(VICTIM, "app", spec | {"healthCheckExprs": [VICTIM_RULE]})
        self.wait(lambda: ready(self.get(VICTIM, "app")), "the victim's GitSync Ready", 120)
        figures.idle = self.heals("idle", edits)
        self.attack(figures)
        accepted, polls = self.trickle.accepted, self.attacker_reconciles()
        started = time.time()
        with attacker.Churning(self.attacker_repo) as churn:
            figures.loaded = self.heals("loaded", edits)
        figures.attacker_rate = self.attacker_rate(started, time.time())
        figures.commits, figures.fetches = churn.commits, self.trickle.accepted - accepted
        figures.attacker_polls = self.attacker_reconciles() - polls
        show(
            "attacker",
            f"while measured: {figures.commits} commits, {figures.fetches} fetches, "
            f"reconciles {dict(figures.attacker_polls)}, {figures.attacker_rate:.0f} requests/s",
        )
        self.outcome(figures)
        return figures

    def attack(self, figures: TenantFigures) -> None:
        """The attacker's namespace at its bounds: every GitSync it may have, one more
        refused, the hoard holding its revision, a render stopped at its memory bound and a
        fetch held by the trickling server."""
        specs = attacker.gitsyncs(self.server.file_url(self.attacker_repo), self.trickle.url)
        one_more = specs.pop(attacker.OVER_QUOTA)
        for name, spec in specs.items():
            self.create(ATTACKER, name, spec)
        self.wait(  # all served first: the one refused is then the last, whatever the order
            lambda: all(self.reason(name) not in ("", "QuotaExceeded") for name in specs),
            "the attacker's GitSyncs served",
            120,
        )
        self.create(ATTACKER, attacker.OVER_QUOTA, one_more)
        self.wait(
            lambda: self.reason(attacker.OVER_QUOTA) == "QuotaExceeded",
            "the GitSync over quota",
            120,
        )
        self.wait(lambda: self.held("hoard") == attacker.hoard_size(), "the hoard holding", 600)
        self.wait(lambda: self.over_memory() > 0, "a render stopped at its memory bound", 600)
        self.wait(lambda: self.trickle.holding() > 0, "a fetch held by the trickle", 120)
        figures.gitsyncs = attacker.QUOTA.git_syncs
        show(
            "attacker",
            f"at its bounds: {attacker.QUOTA.git_syncs} GitSyncs, {attacker.hoard_size():,} held",
        )

    def heals(self, phase: str, edits: int) -> list[float | None]:
        """`edits` out-of-band edits of the victim's ConfigMaps, each timed to its heal."""
        healed = []
        for number in range(edits):
            paced = time.monotonic() + EDIT_SPACING_SECONDS
            name = f"c{number % VICTIM_OBJECTS}"
            patch = {"data": {"value": f"{phase}-{number}"}}
            self.core.patch_namespaced_config_map(name, VICTIM, patch)
            started = time.monotonic()
            healed.append(seconds_until(lambda: self.healed(name), started, HEAL_DEADLINE_SECONDS))  # noqa: B023
            self.alive()
            time.sleep(max(0.0, paced - time.monotonic()))  # the pace is the measurement's
        show(phase, spread(healed))
        return healed

    def outcome(self, figures: TenantFigures) -> None:
        self.alive()
        figures.held_objects = self.held("hoard")
        figures.renders_over_memory = self.over_memory()
        waited = f"health rules of namespace {ATTACKER} used their share"
        figures.rule_waits = sum(waited in line["message"] for line in self.daemon.log_lines())
        gitsyncs = self.objects.list_namespaced_custom_object(GROUP, VERSION, ATTACKER, PLURAL)
        figures.attacker_reasons = Counter(
            str(condition(g).get("reason", "none")) for g in gitsyncs["items"]
        )
        cage = self.daemon.cage
        assert cage is not None
        figures.peak_mib, figures.oom_kills, figures.cage = (
            cage.peak_mib(),
            cage.oom_kills(),
            cage.kind,
        )
        show(
            "cage",
            f"peak {figures.peak_mib:.0f} MiB ({figures.cage}), {figures.oom_kills} OOM kills",
        )

    def healed(self, name: str) -> bool:
        answer = self.core.read_namespaced_config_map(name, VICTIM, _preload_content=False)
        return (json.loads(answer.data).get("data") or {}).get("value") == "same"

    def alive(self) -> None:
        process = self.daemon.process
        if process is None or process.poll() is not None:
            raise BenchError(f"the daemon died; its log ends:\n{tail(self.daemon.log_file)}")

    def attacker_reconciles(self) -> Counter[str]:
        """The reconciles of the attacker's GitSyncs so far, by result."""
        found: Counter[str] = Counter()
        for (metric, labels), value in self.daemon.samples().items():
            shown = dict(labels)
            if metric == "gitopsd_reconcile_total" and shown["source"].startswith(f"{ATTACKER}/"):
                found[shown["result"]] += int(value)
        return found

    def attacker_rate(self, started: float, ended: float) -> float:
        """The API requests a second its GitSyncs sent between `started` and `ended`: those
        of the attacker's namespace but its GitSyncs' status and Events, the daemon's own."""
        logged = audit.requests(self.plane, AUDITED_USER, started)
        paced = [
            r
            for r in logged
            if r.namespace == ATTACKER and r.resource not in ("gitsyncs", "events")
        ]
        return len(paced) / (ended - started)

    def create(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GitSync",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"interval": ATTACKER_INTERVAL, **spec},
        }
        self.objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.objects.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
        return found

    def reason(self, name: str) -> str:
        return str(condition(self.get(ATTACKER, name)).get("reason", ""))

    def held(self, name: str) -> int:
        status = self.get(ATTACKER, name).get("status") or {}
        return int((status.get("inventory") or {}).get("total", 0))

    def over_memory(self) -> int:
        """The attacker's GitSyncs whose last revision failed at the render memory bound."""
        gitsyncs = self.objects.list_namespaced_custom_object(GROUP, VERSION, ATTACKER, PLURAL)
        return sum(
            "sandbox.renderMemory" in str(condition(g).get("message", ""))
            for g in gitsyncs["items"]
        )

    def wait(self, met: Any, what: str, deadline_seconds: float) -> None:
        def checked() -> bool:
            self.alive()
            return bool(met())

        if seconds_until(checked, time.monotonic(), deadline_seconds, 0.5) is None:
            raise BenchError(f"not within {deadline_seconds:.0f} s: {what}")


def victim_manifests() -> dict[str, str]:
    return {
        f"c{n}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{n}\n"
        "data:\n  value: same\n"
        for n in range(VICTIM_OBJECTS)
    }


def condition(gitsync: dict[str, Any]) -> dict[str, Any]:
    conditions = (gitsync.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def ready(gitsync: dict[str, Any]) -> bool:
    return condition(gitsync).get("status") == "True"


def spread(values: list[float | None]) -> str:
    never = sum(1 for v in values if v is None)
    seen = [v for v in values if v is not None]
    if not seen:
        return "never healed"
    shown = (
        f"p50 {ms(percentile(seen, 0.5))}, p90 {ms(percentile(seen, 0.9))}, "
        f"max {ms(max(seen))}; n={len(values)}"
    )
    return shown + (f", {never} never within {HEAL_DEADLINE_SECONDS:.0f} s" if never else "")


def ratio(figures: TenantFigures, share: float) -> float:
    """The victim's latency at `share` with the attacker at its bounds, over it idle; a
    latency never seen counts as forever."""
    loaded = [float("inf") if v is None else v for v in figures.loaded]
    idle = [float("inf") if v is None else v for v in figures.idle]
    return percentile(loaded, share) / percentile(idle, share)


def table(figures: TenantFigures) -> str:
    """The figures against their targets, as a Markdown table."""

    def judged(value: float, limit: float) -> str:
        return "met" if value <= limit else "**missed**"

    p50, p90 = ratio(figures, 0.5), ratio(figures, 0.9)
    polls = ", ".join(f"{r}: {n}" for r, n in sorted(figures.attacker_polls.items()))
    reasons = ", ".join(f"{r}: {n}" for r, n in figures.attacker_reasons.most_common())
    rows = [
        ("victim: edit -> heal, attacker's namespace empty", spread(figures.idle), "", ""),
        ("victim: edit -> heal, attacker at its bounds", spread(figures.loaded), "", ""),
        ("heal p50, at its bounds over empty", times(p50), "≤ 1.10x", judged(p50, WITHIN)),
        ("heal p90, at its bounds over empty", times(p90), "≤ 1.10x", judged(p90, WITHIN)),
        (
            "attacker: GitSyncs (tenantQuota.gitSyncs)",
            f"{figures.gitsyncs} served, one more refused; {reasons}",
            "",
            "",
        ),
        (
            "attacker: objects held in observe mode (tenantQuota.objects)",
            f"{figures.held_objects:,} of {attacker.QUOTA.objects:,}",
            "",
            "",
        ),
        (
            "attacker: GitSyncs whose render stopped at sandbox.renderMemory",
            f"{figures.renders_over_memory} (bound {SANDBOX.render_memory_bytes >> 20} MiB)",
            "",
            "",
        ),
        (
            f"attacker: trickled fetches (network.fetchDeadline {FETCH_DEADLINE_SECONDS} s)",
            f"{figures.fetches} started while measured",
            "",
            "",
        ),
        (
            "attacker: health rules' waits for their share (healthRuleSecondsPerMinute)",
            f"{figures.rule_waits} ({attacker.RULED_OBJECTS} rules of 0.5 s at each poll)",
            "",
            "",
        ),
        (
            "attacker: while measured, commits and its reconciles by result",
            f"{figures.commits} commits; {polls or 'none'}",
            "",
            "",
        ),
        (
            "attacker: API requests a second while measured (tenantQuota.requestsPerSecond)",
            f"{figures.attacker_rate:.0f}",
            f"≤ {pace_bound(figures):.0f}",
            judged(figures.attacker_rate, pace_bound(figures)),
        ),
        (
            f"daemon's cgroup: peak memory ({figures.cage})",
            f"{figures.peak_mib:.0f} MiB",
            f"< {MEMORY_LIMIT_MIB} MiB",
            judged(figures.peak_mib, MEMORY_LIMIT_MIB - 1),
        ),
        ("daemon's cgroup: OOM kills", str(figures.oom_kills), "0", judged(figures.oom_kills, 0)),
    ]
    lines = ["| figure | measured | target | |", "|---|---|---|---|"]
    return "\n".join([*lines, *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)])


def pace_bound(figures: TenantFigures) -> float:
    """The most the attacker may send a second over the measured window: its pace, and
    its burst spread over the window."""
    window = EDIT_SPACING_SECONDS * figures.edits
    return attacker.QUOTA.requests_per_second + attacker.QUOTA.request_burst / window


def times(value: float) -> str:
    return f"{value:.2f}x" if value != float("inf") else "never healed"


def ms(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def show(step: str, text: str) -> None:
    print(f"  tenants {step:<9} {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
