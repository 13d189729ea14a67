"""`make bench`: gitopsd against kubectl and its own targets, on a real control plane.

Starts a control plane, bare (kube-apiserver + etcd) and then with its controllers
(kube-controller-manager, kube-scheduler, kwok's nodes), generates repositories of each size,
and measures on each, side by side: cold sync, no-op sync and no-op diff (gitopsd against
kubectl), at the smallest size a chart's render and sync (gitopsd against helm and kubectl),
then the daemon's cold start, idle cost, edit -> detection and heal latencies,
one-file commit -> applied, and memory; then a fleet of GitSyncs served by one daemon; then
a tenant's heal latency beside another tenant at its bounds. With Flux built (--peers flux
builds it), Flux beside gitopsd: on the fleet's tenants, and on one source of the largest
size. Prints the tables and writes them to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import gitopsd
from tests.bench import charts, machine, report
from tests.bench.daemon import measure_daemon
from tests.bench.fleet import FleetFigures, measure_fleet
from tests.bench.fleet import table as fleet_table
from tests.bench.lab import Lab
from tests.bench.measure import BenchError
from tests.bench.oneshot import side_by_side
from tests.bench.peers import report as peers_report
from tests.bench.peers.fleet import FluxFleetFigures, measure_flux_fleet
from tests.bench.peers.flux import FluxBinaries, provide_flux
from tests.bench.peers.source import measure_flux_source
from tests.bench.report import CLUSTERS, Circumstances, SizeResults
from tests.bench.tenants import TenantFigures, measure_tenants
from tests.bench.tenants import table as tenants_table
from tests.harness.controlplane import Binaries, provide_binaries, running_control_plane
from tests.harness.gitserver import GitServer

PEERS = ("flux",)
"""The peers --peers may name."""


def main() -> int:
    options = parser().parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # clean up on SIGTERM as on Ctrl-C
    try:
        results, circumstances, fleet, tenants, flux_fleet = benchmark(options)
    except KeyboardInterrupt:
        print("bench: interrupted; the control plane and every child were stopped", file=sys.stderr)
        return 130
    except (BenchError, AssertionError, RuntimeError) as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 1
    peers = peers_report.section(results, fleet, flux_fleet)
    text = report.document(results, circumstances, fleet, tenants, peers)
    print("\n" + report.markdown(results))
    if fleet:
        print("\n" + fleet_table(fleet))
    if peers:
        print("\n" + peers)
    if tenants:
        print("\n" + tenants_table(tenants))
    options.output.write_text(text)
    print(f"bench: wrote {options.output}")
    return 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    add = parser.add_argument
    add("--sizes", type=_sizes, default=[1000, 10000], help="objects per repository (1000,10000)")
    add("--runs", type=int, default=1, help="runs per size; the report shows medians (1)")
    add("--edits", type=int, default=20, help="out-of-band edits timed per run (20)")
    add("--commits", type=int, default=5, help="one-file commits timed per run (5)")
    add("--idle-seconds", type=float, default=30.0, help="the daemon's idle window (30)")
    add("--output", type=Path, default=machine.REPOSITORY / "BENCHMARKS.md")
    add(
        "--clusters",
        type=_clusters,
        default=list(CLUSTERS),
        help="control planes to measure on: bare, controllers, or both (bare,controllers)",
    )
    add("--workdir", type=Path, help="keep the clusters' data, repositories and logs here")
    add(
        "--peers",
        type=_peers,
        default=[],
        help="peers to build (once) and measure beside gitopsd: flux (make bench PEERS=flux); "
        "without it, a peer is measured when it is already built",
    )
    add("--fleet", type=int, default=1000, help="GitSyncs of the fleet; 0: none (1000)")
    add(
        "--tenants",
        type=int,
        default=60,
        help="the victim tenant's edits timed beside an idle and a hostile one; 0: none (60: "
        "with 20, p90 was the 18th value and moved by a tenth between runs)",
    )
    return parser


def benchmark(
    options: argparse.Namespace,
) -> tuple[
    list[SizeResults],
    Circumstances,
    FleetFigures | None,
    TenantFigures | None,
    FluxFleetFigures | None,
]:
    started, load = time.monotonic(), os.getloadavg()[0]
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    binaries = provide_binaries()
    flux = _flux(options.peers)
    os.environ["PATH"] = f"{binaries.helm.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    _compile_gitopsd()
    results = []
    with _workdir(options.workdir) as workdir:
        for cluster in options.clusters:
            results += measure_cluster(binaries, cluster, workdir / cluster, options, flux)
        fleet = flux_fleet = None
        if options.fleet:
            fleet = measure_fleet(binaries, workdir / "fleet", options.fleet)
        if options.fleet and flux:
            flux_fleet = measure_flux_fleet(binaries, flux, workdir / "flux-fleet", options.fleet)
        tenants = None
        if options.tenants:
            tenants = measure_tenants(binaries, workdir / "tenants", options.tenants)
    circumstances = Circumstances(
        date=date,
        machine=machine.describe(binaries) + (f", Flux's {flux.versions}" if flux else ""),
        revision=machine.gitopsd_revision(),
        command=" ".join(["python -m tests.bench", *sys.argv[1:]]),
        runs=options.runs,
        minutes=(time.monotonic() - started) / 60,
        load=(load, os.getloadavg()[0]),
    )
    return results, circumstances, fleet, tenants, flux_fleet


def _flux(peers: list[str]) -> FluxBinaries | None:
    """Flux's binaries: built first when asked for, else only if already built."""
    flux = provide_flux(build="flux" in peers)
    if flux is None:
        print(
            "bench: Flux is not built, so gitopsd is measured alone; `make bench PEERS=flux` "
            "(--peers flux) builds it once, in a few minutes, and measures it beside gitopsd",
            flush=True,
        )
    return flux


def _compile_gitopsd() -> None:
    """gitopsd's bytecode, written as installing it writes it (pip, the image), so that each
    command measured starts as an installed gitopsd does even where the environment asks
    Python to write none (PYTHONDONTWRITEBYTECODE): compiling every module again at each
    start cost about 0.25 s of processor time, a fifth of a chart's render."""
    compileall.compile_dir(Path(gitopsd.__file__).parent, quiet=1)


def measure_cluster(
    binaries: Binaries,
    cluster: str,
    workdir: Path,
    options: argparse.Namespace,
    flux: FluxBinaries | None,
) -> list[SizeResults]:
    """Every size on a control plane of its own, `cluster` (a key of CLUSTERS)."""
    workdir.mkdir()
    with running_control_plane(
        binaries, workdir / "cluster", with_controllers=cluster == "controllers"
    ) as plane:
        (workdir / "git").mkdir()
        lab = Lab(plane, binaries, GitServer(root=workdir / "git"), workdir)
        lab.logs.mkdir()
        print(f"bench: {CLUSTERS[cluster]}: at {plane.url}, work in {workdir}", flush=True)
        return [measure_size(lab, size, cluster, options, flux) for size in options.sizes]


def measure_size(
    lab: Lab, size: int, cluster: str, options: argparse.Namespace, flux: FluxBinaries | None
) -> SizeResults:
    results = SizeResults(size, cluster)
    for number in range(1, options.runs + 1):
        print(f"bench: {size:,} objects, {cluster}, run {number} of {options.runs}", flush=True)
        tag = f"s{size}-r{number}"  # each cluster has its own control plane
        results.oneshot.append(side_by_side(lab, size, tag))
        if size == options.sizes[0]:  # a chart's cost is per render: the smallest size shows it
            results.charts.append(charts.side_by_side(lab, size, tag))
        last = size == options.sizes[-1] and number == options.runs  # nothing after it here
        daemon = measure_daemon(
            lab, size, tag, options.edits, options.commits, options.idle_seconds, rollout=last
        )
        results.daemon.append(daemon)
        # Flux once, on the largest size of the bare cluster: the controllers' rollouts would
        # add the same work to both sides, and minutes to the run
        if flux and cluster == "bare" and size == options.sizes[-1] and number == 1:
            results.flux = measure_flux_source(lab, flux, size, tag)
    return results


@contextlib.contextmanager
def _workdir(kept: Path | None) -> Iterator[Path]:
    if kept is not None:
        kept.mkdir(parents=True)  # a fresh one: a cluster's data is never reused
        yield kept.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="gitopsd-bench-") as temporary:
        yield Path(temporary)


def _sizes(text: str) -> list[int]:
    sizes = sorted({int(part) for part in text.split(",")})
    if sizes[0] < 15:
        raise argparse.ArgumentTypeError("each size must be at least 15 objects")
    return sizes


def _clusters(text: str) -> list[str]:
    clusters = [part for part in text.split(",") if part]
    unknown = set(clusters) - set(CLUSTERS)
    if unknown or not clusters:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(CLUSTERS)}")
    return [cluster for cluster in CLUSTERS if cluster in clusters]


def _peers(text: str) -> list[str]:
    peers = [part for part in text.split(",") if part]
    if set(peers) - set(PEERS):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(PEERS)}")
    return peers


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
