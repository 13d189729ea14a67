"""Flux's figures beside gitopsd's, as tables: the fleet, and one source of the largest size,
each with the ratio of gitopsd's figure over Flux's from the same run, and the CPU each
process spent on each step (Flux's controllers, and the API server and etcd serving them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from statistics import median

from tests.bench.fleet import FleetFigures
from tests.bench.oneshot import NOOP_SYNC
from tests.bench.peers.fleet import CREATION, FluxFleetFigures
from tests.bench.peers.source import COLD, COMMIT, HEAL, INTERVAL, NOOP, FluxSourceFigures
from tests.bench.report import CLUSTERS, MiB, SizeResults, samples, seconds, table

HEADER = ("figure", "gitopsd", "Flux", "ratio")


def section(
    results: Sequence[SizeResults], fleet: FleetFigures | None, flux: FluxFleetFigures | None
) -> str:
    """The section "Beside Flux": the fleet's tables, then the one source's; "" when Flux
    was not measured."""
    parts = []
    if fleet and flux:
        parts += fleet_tables(fleet, flux)
    for result in results:
        if result.flux:
            parts += source_tables(result, result.flux)
    return "\n".join(["## Beside Flux, in the same run\n", HOW, *parts]) if parts else ""


HOW = """Flux's source-controller and kustomize-controller (the versions are under Machine)
ran as processes outside the cluster, as gitopsd's daemon does: leader election off,
`--concurrent=8` (gitopsd's concurrentReconciles), the artifact storage on loopback, git read
over smart HTTP (gitopsd reads it over `file://`). A ratio is gitopsd's figure over Flux's.
How each figure is taken: [docs/benchmarks.md](docs/benchmarks.md).
"""


def fleet_tables(ours: FleetFigures, theirs: FluxFleetFigures) -> list[str]:
    idle = f"idle {ours.idle_seconds:.0f} s"
    rows = [
        ratio_row(
            "all applied after creation", ours.all_ready_seconds, theirs.all_ready_seconds, seconds
        ),
        ratio_row("RSS after the idle window", ours.rss_mib, theirs.rss_mib, mib),
        ratio_row("peak RSS (VmHWM)", ours.peak_rss_mib, theirs.peak_rss_mib, mib),
        ratio_row("threads, at most", ours.threads, theirs.threads, str),
        ratio_row(f"{idle}: CPU", ours.idle_cpu_seconds, theirs.idle_cpu_seconds, seconds),
        ratio_row(f"{idle}: API requests", ours.idle_requests, theirs.idle_requests, count),
        ratio_row(
            "a commit, no webhook -> all applied",
            ours.polled_commit_seconds,
            theirs.polled_commit_seconds,
            seconds,
        ),
        ratio_row(
            "a commit, announced -> all applied (gitopsd: one webhook call; Flux: a Receiver's)",
            ours.commit_seconds,
            theirs.announced_commit_seconds,
            seconds,
        ),
    ]
    per = {CREATION: theirs.tenants, **{step: 1 for step in theirs.cpu if step != CREATION}}
    return [
        f"### A fleet of {ours.gitsyncs:,} tenants\n",
        "Flux's memory, threads, CPU and requests are its two controllers' together.\n",
        table(HEADER, rows),
        "Flux's CPU by process, each step (per tenant for the creation):\n",
        cpu_table(theirs.cpu, per),
    ]


def source_tables(result: SizeResults, flux: FluxSourceFigures) -> list[str]:
    daemon, size = result.daemon, result.size
    oneshot = [run[NOOP_SYNC, "gitopsd"] for run in result.oneshot]
    heal = median(samples(d.healed for d in daemon))
    applied = median(samples(d.applied for d in daemon))
    steps = flux.steps
    rows = [
        ratio_row(
            "cold apply: until applied",
            median([d.cold_start_seconds for d in daemon]),
            steps[COLD].seconds,
            seconds,
        ),
        ratio_row(
            "cold apply: API requests",
            median([d.cold_start_requests for d in daemon]),
            steps[COLD].requests,
            count,
        ),
        ratio_row(
            "a no-op pass: wall time (gitopsd: a no-op sync)",
            median([f.seconds for f in oneshot]),
            steps[NOOP].seconds,
            seconds,
        ),
        ratio_row(
            "a no-op pass: API requests",
            median([f.requests for f in oneshot]),
            steps[NOOP].requests,
            count,
        ),
        ratio_row(
            "an edit -> corrected (gitopsd: p50, at once; Flux: a pass asked for at once)",
            heal,
            steps[HEAL].seconds,
            seconds,
        ),
        (
            "an edit -> corrected, no one asking",
            f"{seconds(heal)} (p50)",
            f"at the next interval ({INTERVAL} here), then {seconds(steps[HEAL].seconds)}",
            "",
        ),
        ratio_row(
            "a one-file commit -> applied (gitopsd: p50, webhook; Flux: its GitRepository asked)",
            applied,
            steps[COMMIT].seconds,
            seconds,
        ),
        ratio_row("RSS once done", median([d.rss for d in daemon]), flux.rss, mib_of_bytes),
        ratio_row(
            "peak RSS (VmHWM)", median([d.peak_rss for d in daemon]), flux.peak_rss, mib_of_bytes
        ),
    ]
    cpu = {name: step.cpu for name, step in steps.items()}
    return [
        f"### One source of {size:,} objects, {CLUSTERS[result.cluster]}\n",
        "gitopsd's figures are its daemon's (enforce, selfHeal, webhook) and, for the no-op "
        "pass, its no-op sync, from the section above; Flux's are both controllers' together, "
        "each step asked for with `reconcile.fluxcd.io/requestedAt`.\n",
        table(HEADER, rows),
        "Flux's CPU by process, each step:\n",
        cpu_table(cpu, dict.fromkeys(cpu, 1)),
    ]


def ratio_row(
    name: str, ours: float | None, theirs: float | None, shown: Callable[[float], str]
) -> tuple[str, ...]:
    """A row of both figures and gitopsd's over Flux's ("" where either is missing or 0)."""

    def text(value: float | None) -> str:
        return "never" if value is None or value == math.inf else shown(value)

    ratio = ""
    if ours is not None and theirs and math.isfinite(ours) and math.isfinite(theirs):
        ratio = f"{ours / theirs:.2f}x"
    return (name, text(ours), text(theirs), ratio)


def cpu_table(cpu: Mapping[str, Mapping[str, float]], per: Mapping[str, int]) -> str:
    """CPU seconds by step (rows) and process (columns), each step's divided by per[step]."""
    processes = list(next(iter(cpu.values()), {}))
    rows = []
    for step, spent in cpu.items():
        each = per[step]
        label = f"{step}, per tenant" if each > 1 else step
        rows.append((label, *(seconds(spent[name] / each) for name in processes)))
    return table(("step", *processes), rows)


def mib(value: float) -> str:
    return f"{value:.0f} MiB"


def mib_of_bytes(value: float) -> str:
    return mib(value / MiB)


def count(value: float) -> str:
    return f"{value:,.0f}"
