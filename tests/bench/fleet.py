"""The fleet: one daemon serving many GitSyncs, each in a namespace of its own and all of one
repository (ten ConfigMaps and a Service). Measured from outside, on a bare control plane of
its own: from creating the GitSyncs to every one Ready, the daemon's memory and threads,
what it costs idle (CPU and API requests, its Lease aside), and a commit announced by one
GitSync's webhook until every GitSync applied it. `make bench` measures it (--fleet); alone:

    python -m tests.bench.fleet --gitsyncs 1000 [--replicas 3]

With replicas, they share the GitSyncs by sharding, on the same machine: memory and threads
are the largest replica's, idle CPU all of theirs, and the webhook is called on the replica
that serves its GitSync (the others' share hears of the commit at its next poll).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.bench.measure import (
    BenchError,
    HighWater,
    cpu_seconds,
    process_status,
    seconds_until,
    threads,
)
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

GROUP, VERSION, PLURAL = "gitopsd.io", "v1alpha1", "gitsyncs"
CRD = Path(__file__).resolve().parents[2] / "config" / "crd" / "gitsyncs.yaml"
TOKEN = b"fleet-webhook-token"
CONFIG_MAPS = 10
INTERVAL_SECONDS = 60
"""Each GitSync's interval, and the idle window: every GitSync polls once within it."""


@dataclass
class FleetFigures:
    gitsyncs: int
    replicas: int = 1
    all_ready_seconds: float | None = None
    rss_mib: float = 0.0
    threads: int = 0
    """The most any replica ran at once, from creating the GitSyncs to the commit applied."""
    idle_seconds: float = 0.0
    idle_cpu_seconds: float = 0.0
    idle_requests: int = 0
    idle_kinds: Counter[str] = field(default_factory=Counter)
    """The idle requests by verb and resource."""
    commit_seconds: float | None = None
    """From one webhook call to every GitSync carrying the commit (None: not within)."""
    polled_commit_seconds: float | None = None
    """From a commit no webhook announced to every GitSync carrying it, at their polls."""
    peak_rss_mib: float = 0.0
    """The largest replica's VmHWM after the idle window."""


def main() -> int:
    options = _parser().parse_args()
    with tempfile.TemporaryDirectory(prefix="gitopsd-fleet-") as temporary:
        try:
            figures = measure_fleet(
                provide_binaries(), Path(temporary), options.gitsyncs, options.replicas
            )
        except BenchError as error:
            print(f"fleet: error: {error}", file=sys.stderr)
            return 1
    print(table(figures))
    return 0


def measure_fleet(
    binaries: Binaries, workdir: Path, gitsyncs: int, replicas: int = 1
) -> FleetFigures:
    """`gitsyncs` GitSyncs served by `replicas` daemons (sharing them by sharding), on a
    bare control plane of their own."""
    print(f"bench: fleet of {gitsyncs:,} GitSyncs, work in {workdir}", flush=True)
    workdir.mkdir(parents=True, exist_ok=True)
    with running_control_plane(binaries, workdir / "cluster", with_controllers=False) as plane:
        (workdir / "git").mkdir()
        fleet = Fleet(plane, GitServer(root=workdir / "git"), workdir, gitsyncs, replicas)
        try:
            return fleet.measure()
        finally:
            for daemon in fleet.daemons:
                daemon.stop()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fleet", description=__doc__)
    parser.add_argument("--gitsyncs", type=int, default=1000, help="GitSyncs (1000)")
    parser.add_argument("--replicas", type=int, default=1, help="daemons sharing them (1)")
    return parser


class Fleet:
    def __init__(
        self, plane: ControlPlane, server: GitServer, workdir: Path, count: int, replicas: int
    ):
        self.plane, self.count = plane, count
        self.api = api_client(plane)
        self.repo = server.create_repo("fleet")
        self.repo.commit(manifests("one"))
        self.url = server.file_url(self.repo)
        top: dict[str, Any] = {"gitSyncs": {"enabled": True, "allowInsecure": True}}
        if replicas > 1:
            top["sharding"] = {"enabled": True, "namespace": "default"}
        kubeconfig = plane.audited_kubeconfig
        self.daemons = [
            DaemonProcess.configured(workdir, f"fleet-{n}", AUDITED_USER, kubeconfig, [], **top)
            for n in range(replicas)
        ]

    def measure(self) -> FleetFigures:
        figures = FleetFigures(self.count, len(self.daemons))
        self.install()
        for daemon in self.daemons:
            daemon.start()
        for daemon in self.daemons:  # each writes for its share (past its hold) before
            daemon.wait_value("gitopsd_leader", lambda v: v == 1, "the replica to write", 60)
        peaks = [HighWater(pid, threads) for pid in self.pids]
        created = time.monotonic()
        for number in range(self.count):
            self.create(number)
        deadline = 120.0 + 0.5 * self.count
        figures.all_ready_seconds = seconds_until(self.all_ready, created, deadline, 0.5)
        if figures.all_ready_seconds is None:
            raise BenchError(f"not every GitSync was Ready within {deadline:.0f} s")
        show("all ready", f"{figures.all_ready_seconds:.1f} s")
        self.idle(figures, INTERVAL_SECONDS)
        self.commit_polled(figures)
        self.commit(figures)
        figures.threads = max(peak.stop() for peak in peaks)
        show("threads", f"{figures.threads} at most")
        return figures

    def install(self) -> None:
        install_crd(self.api)
        core: Any = client.CoreV1Api(self.api)
        token = base64.b64encode(TOKEN).decode()
        for number in range(self.count):
            namespace = f"fleet-{number}"
            core.create_namespace({"metadata": {"name": namespace}})
            secret = {"metadata": {"name": "hook"}, "data": {"token": token}}
            core.create_namespaced_secret(namespace, secret)

    def create(self, number: int) -> None:
        namespace = f"fleet-{number}"
        spec = {
            "repository": {"url": self.url},
            "interval": f"{INTERVAL_SECONDS}s",
            "prune": True,
            "webhook": {"secretRef": {"name": "hook"}},
        }
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GitSync",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": spec,
        }
        objects: Any = client.CustomObjectsApi(self.api)
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def all_ready(self) -> bool:
        objects: Any = client.CustomObjectsApi(self.api)
        found = objects.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        return len(found) == self.count and all(ready(gitsync) for gitsync in found)

    def idle(self, figures: FleetFigures, seconds: float) -> None:
        pids = self.pids
        started, cpu = time.time(), sum(cpu_seconds(pid) for pid in pids)
        time.sleep(seconds)  # the measurement is this window: nothing else happens in it
        figures.idle_seconds = seconds
        figures.idle_cpu_seconds = sum(cpu_seconds(pid) for pid in pids) - cpu
        logged = audit.requests(self.plane, AUDITED_USER, started)
        idle = [r for r in logged if r.resource != "leases"]
        figures.idle_requests = len(idle)
        figures.idle_kinds = Counter(
            f"{r.verb} {r.resource}{' (dry-run)' if r.dry_run else ''}" for r in idle
        )
        figures.rss_mib = max(process_status(pid, "VmRSS") for pid in pids) / 2**20
        figures.peak_rss_mib = max(process_status(pid, "VmHWM") for pid in pids) / 2**20
        show(
            f"idle {seconds:.0f} s",
            f"{figures.idle_requests} requests, {figures.idle_cpu_seconds:.2f} s CPU, "
            f"RSS {figures.rss_mib:.0f} MiB; {_most(figures.idle_kinds)}",
        )

    def commit_polled(self, figures: FleetFigures) -> None:
        """A commit no webhook announces, until every GitSync applied it at its poll."""
        self.repo.commit(manifests("polled"))
        started = time.monotonic()
        deadline = 2 * INTERVAL_SECONDS + 0.2 * self.count
        carried = seconds_until(lambda: self.all_carry("polled"), started, deadline, 0.5)
        figures.polled_commit_seconds = carried
        show("polled", f"{carried or 0:.1f} s to all {self.count}, no webhook")

    def commit(self, figures: FleetFigures) -> None:
        """A commit announced by the first GitSync's webhook, until every one applied it."""
        self.repo.commit(manifests("two"))
        body = b'{"ref": "refs/heads/main"}'
        signature = "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()
        started = time.monotonic()
        headers = {"X-Hub-Signature-256": signature}
        answers = [d.post("/hooks/gitsyncs/fleet-0/app", body, headers) for d in self.daemons]
        if 202 not in answers:  # the replica that serves fleet-0; the others know no such hook
            raise BenchError(f"the webhook answered {answers}")
        deadline = 60.0 + 0.2 * self.count
        figures.commit_seconds = seconds_until(
            lambda: self.all_carry("two"), started, deadline, 0.2
        )
        show("commit", f"{figures.commit_seconds or 0:.1f} s to all {self.count}")

    def all_carry(self, value: str) -> bool:
        return carrying(self.api, value) == self.count

    @property
    def pids(self) -> list[int]:
        return [daemon.process.pid for daemon in self.daemons if daemon.process is not None]


def install_crd(api: Any) -> None:
    """The GitSync CRD, once it is Established."""
    extensions: Any = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        conditions = crd.status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    if seconds_until(established, time.monotonic(), 60, 0.2) is None:
        raise BenchError("the GitSync CRD was not Established within 60 s")


def carrying(api: Any, value: str) -> int:
    """The tenants whose ConfigMap c0 carries `value` (what manifests(value) commits)."""
    core: Any = client.CoreV1Api(api)
    found = core.list_config_map_for_all_namespaces(field_selector="metadata.name=c0").items
    return sum(1 for cm in found if (cm.data or {}).get("value") == value)


def manifests(value: str) -> dict[str, str]:
    """Ten ConfigMaps and a Service, namespaced by their GitSync."""
    files = {
        f"c{n}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{n}\n"
        f"data:\n  value: {value if n == 0 else 'same'}\n"
        for n in range(CONFIG_MAPS)
    }
    files["service.yaml"] = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n"
        "  selector: {app: web}\n  ports: [{port: 80}]\n"
    )
    return files


def _most(kinds: Counter[str]) -> str:
    """The commonest requests, as "(list configmaps: 3, ...)"; "" when there were none."""
    common = ", ".join(f"{kind}: {count}" for kind, count in kinds.most_common(4))
    return f"({common})" if common else ""


def ready(gitsync: dict[str, Any]) -> bool:
    conditions = (gitsync.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def table(figures: FleetFigures) -> str:
    """The figures against the fleet's targets, as a Markdown table."""

    def shown(value: float | None, unit: str) -> str:
        return "never" if value is None else f"{value:.1f} {unit}"

    rows = [
        ("every GitSync Ready after creation", shown(figures.all_ready_seconds, "s"), "60 s"),
        ("RSS", f"{figures.rss_mib:.0f} MiB", "220 MiB"),
        ("threads, at most", str(figures.threads), "64"),
        (
            f"idle {figures.idle_seconds:.0f} s: API requests",
            f"{figures.idle_requests} {_most(figures.idle_kinds)}".strip(),
            "0",
        ),
        (f"idle {figures.idle_seconds:.0f} s: CPU", f"{figures.idle_cpu_seconds:.2f} s", ""),
        ("a commit, no webhook -> all applied", shown(figures.polled_commit_seconds, "s"), ""),
        ("webhook -> all applied", shown(figures.commit_seconds, "s"), "5 s"),
    ]
    replicas = f", {figures.replicas} replicas" if figures.replicas > 1 else ""
    head = f"| {figures.gitsyncs:,} GitSyncs x 11 objects{replicas} | measured | target |"
    lines = [head, "|---|---|---|"]
    return "\n".join([*lines, *(f"| {a} | {b} | {c} |" for a, b, c in rows)])


def show(step: str, text: str) -> None:
    print(f"  fleet {step:<11} {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
