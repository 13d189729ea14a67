"""The fleet: one daemon serving many GitSyncs, each in a namespace of its own and all of one
repository (ten ConfigMaps and a Service). Measured from outside, on a bare control plane of
its own: from creating the GitSyncs to every one Ready, the daemon's memory and threads,
what it costs idle (CPU and API requests, its Lease aside), and a commit announced by one
GitSync's webhook until every GitSync applied it, each of those two against its CPU floor
(`floor`: the requests the daemon sent, times the CPU a request costs here, calibrated in the
same run, over the cores), with the CPU each process spent per GitSync. `make bench`
measures it (--fleet); alone:

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

from tests.bench.floor import (
    Calibration,
    Processes,
    Window,
    calibrate,
    machine_use,
    per_request,
    per_unit,
    spent,
)
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
FLOOR_TARGET = 1.1
"""Creation until all Ready, and a commit until all applied it: within 1.1x their floors."""


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
    calibration: Calibration | None = None
    created: Window | None = None
    """From creating the GitSyncs until every one is Ready: CPU and the daemon's requests."""
    committed: Window | None = None
    """From the webhook call until every GitSync carries the commit."""
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
        figures.calibration = self.calibrate()
        for daemon in self.daemons:
            daemon.start()
        for daemon in self.daemons:  # each writes for its share (past its hold) before
            daemon.wait_value("gitopsd_leader", lambda v: v == 1, "the replica to write", 60)
        peaks = [HighWater(pid, threads) for pid in self.pids]
        processes = Processes.of(self.plane, self.pids)
        figures.created = spent(processes, lambda: self.create_all(figures))
        show("all ready", f"{figures.all_ready_seconds:.1f} s")
        self.idle(figures, INTERVAL_SECONDS)
        self.commit_polled(figures)
        figures.committed = spent(processes, lambda: self.commit(figures))
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

    def calibrate(self) -> Calibration:
        """CPU per API request, on this control plane before the daemons start; the
        ConfigMaps it made are deleted again, so that no daemon lists them."""
        core: Any = client.CoreV1Api(self.api)
        core.create_namespace({"metadata": {"name": "calibration"}})
        calibration = calibrate(self.plane, "calibration")
        core.delete_collection_namespaced_config_map("calibration")
        costs = ", ".join(f"{name} {1000 * cpu:.2f} ms" for name, cpu in calibration.cpu.items())
        show("calibrated", f"{1000 * calibration.per_request:.2f} ms CPU a request ({costs})")
        return calibration

    def create_all(self, figures: FleetFigures) -> int:
        """Creates every GitSync and waits until all are Ready: the daemons' requests."""
        since, created = time.time(), time.monotonic()
        for number in range(self.count):
            self.create(number)
        deadline = 120.0 + 0.5 * self.count
        figures.all_ready_seconds = seconds_until(self.all_ready, created, deadline, 0.5)
        if figures.all_ready_seconds is None:
            raise BenchError(f"not every GitSync was Ready within {deadline:.0f} s")
        return self.requests_since(since)

    def requests_since(self, since: float) -> int:
        """The daemons' requests since `since` (Unix seconds), their Leases' aside."""
        logged = audit.requests(self.plane, AUDITED_USER, since)
        return sum(1 for r in logged if r.resource != "leases")

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

    def commit(self, figures: FleetFigures) -> int:
        """A commit announced by the first GitSync's webhook, until every one applied it:
        the daemons' requests meanwhile."""
        self.repo.commit(manifests("two"))
        body = b'{"ref": "refs/heads/main"}'
        signature = "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()
        since, started = time.time(), time.monotonic()
        headers = {"X-Hub-Signature-256": signature}
        answers = [d.post("/hooks/gitsyncs/fleet-0/app", body, headers) for d in self.daemons]
        if 202 not in answers:  # the replica that serves fleet-0; the others know no such hook
            raise BenchError(f"the webhook answered {answers}")
        deadline = 60.0 + 0.2 * self.count
        figures.commit_seconds = seconds_until(
            lambda: self.all_carry("two"), started, deadline, 0.2
        )
        show("commit", f"{figures.commit_seconds or 0:.1f} s to all {self.count}")
        return self.requests_since(since)

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

    target = f"<= {FLOOR_TARGET:g}x its floor"
    ready, webhook = (
        (_against_floor(figures, figures.created), _against_floor(figures, figures.committed))
        if figures.created is not None  # else measured without its floor: the seconds alone
        else (shown(figures.all_ready_seconds, "s"), shown(figures.commit_seconds, "s"))
    )
    floored = target if figures.created is not None else ""
    rows = [
        ("every GitSync Ready after creation", ready, floored),
        ("RSS", f"{figures.rss_mib:.0f} MiB", "220 MiB"),
        ("threads, at most", str(figures.threads), "64"),
        (
            f"idle {figures.idle_seconds:.0f} s: API requests",
            f"{figures.idle_requests} {_most(figures.idle_kinds)}".strip(),
            "0",
        ),
        (f"idle {figures.idle_seconds:.0f} s: CPU", f"{figures.idle_cpu_seconds:.2f} s", ""),
        ("a commit, no webhook -> all applied", shown(figures.polled_commit_seconds, "s"), ""),
        ("webhook -> all applied", webhook, floored),
        *_costs(figures),
    ]
    replicas = f", {figures.replicas} replicas" if figures.replicas > 1 else ""
    head = f"| {figures.gitsyncs:,} GitSyncs x 11 objects{replicas} | measured | target |"
    lines = [head, "|---|---|---|"]
    return "\n".join([*lines, *(f"| {a} | {b} | {c} |" for a, b, c in rows)])


def _against_floor(figures: FleetFigures, window: Window | None) -> str:
    """A step's seconds, its floor and their ratio, with met or missed."""
    calibration = figures.calibration
    if window is None or calibration is None:
        return ""
    seconds = figures.all_ready_seconds if window is figures.created else figures.commit_seconds
    floor = window.floor(calibration.per_request)
    if seconds is None:
        return f"never (floor {floor:.1f} s)"
    ratio = seconds / floor
    verdict = "met" if ratio <= FLOOR_TARGET else "**missed**"
    return f"{seconds:.1f} s, {ratio:.2f}x its floor of {floor:.1f} s: {verdict}"


def _costs(figures: FleetFigures) -> list[tuple[str, str, str]]:
    """What a GitSync created, and one applying a commit, cost: requests and CPU by process;
    and what one request costs, as calibrated."""
    calibration, count = figures.calibration, figures.gitsyncs
    if calibration is None or figures.created is None or figures.committed is None:
        return []
    each = ", ".join(f"{name} {1000 * cpu:.2f} ms" for name, cpu in calibration.cpu.items())
    return [
        ("API requests per GitSync created", f"{figures.created.requests / count:.2f}", ""),
        ("CPU per GitSync created", per_unit(figures.created, count), ""),
        (
            "creation: CPU per API request (calibrated)",
            per_request(figures.created, calibration),
            "",
        ),
        ("creation: the machine busy", machine_use(figures.created), ""),
        (
            "API requests per GitSync applying a commit",
            f"{figures.committed.requests / count:.2f}",
            "",
        ),
        ("CPU per GitSync applying a commit", per_unit(figures.committed, count), ""),
        (
            "webhook: CPU per API request (calibrated)",
            per_request(figures.committed, calibration),
            "",
        ),
        ("webhook: the machine busy", machine_use(figures.committed), ""),
        (
            f"CPU per API request ({calibration.requests:,} applies of a ConfigMap)",
            f"{1000 * calibration.per_request:.2f} ms ({each})",
            "",
        ),
    ]


def show(step: str, text: str) -> None:
    print(f"  fleet {step:<11} {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
