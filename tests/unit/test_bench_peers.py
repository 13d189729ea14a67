"""Flux beside gitopsd in BENCHMARKS.md: the option that asks for it, and its tables, each
figure beside gitopsd's with the ratio of the two."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.bench.__main__ import parser
from tests.bench.daemon import DaemonFigures
from tests.bench.fleet import FleetFigures
from tests.bench.measure import Figure
from tests.bench.peers import report
from tests.bench.peers.fleet import ANNOUNCED, CREATION, POLLED, FluxFleetFigures
from tests.bench.peers.flux import applied
from tests.bench.peers.source import COLD, COMMIT, HEAL, NOOP, FluxSourceFigures, Step
from tests.bench.report import SizeResults

MiB = 2**20
CPU = {"source-controller": 2.0, "kustomize-controller": 8.0, "kube-apiserver": 6.0, "etcd": 1.0}


@pytest.mark.parametrize(
    ("arguments", "peers"),
    [([], []), (["--peers", "flux"], ["flux"]), (["--peers", ""], [])],
)
def test_peers_are_asked_for_by_name(arguments: list[str], peers: list[str]) -> None:
    assert parser().parse_args(arguments).peers == peers


def test_an_unknown_peer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--peers", "argo"])
    assert "choose from flux" in capsys.readouterr().err


def fleets() -> tuple[FleetFigures, FluxFleetFigures]:
    ours = FleetFigures(1000, all_ready_seconds=49.5, rss_mib=210.0, threads=28)
    ours.idle_seconds, ours.idle_cpu_seconds, ours.peak_rss_mib = 60, 5.8, 258.0
    ours.polled_commit_seconds, ours.commit_seconds = 20.2, 15.5
    theirs = FluxFleetFigures(1000, all_ready_seconds=194.7, rss_mib=375.0, threads=22)
    theirs.idle_seconds, theirs.idle_cpu_seconds, theirs.peak_rss_mib = 60, 62.8, 404.0
    theirs.idle_requests, theirs.idle_kinds = 22000, Counter({"patch configmaps (dry-run)": 1})
    theirs.polled_commit_seconds, theirs.announced_commit_seconds = 207.9, None
    theirs.cpu = {CREATION: dict.fromkeys(CPU, 100.0), POLLED: CPU, ANNOUNCED: CPU}
    return ours, theirs


def rows(markdown: str) -> dict[str, list[str]]:
    """Each table row by its first cell: the rest of its cells."""
    cells = [line.strip("|").split(" | ") for line in markdown.splitlines() if line.startswith("|")]
    return {row[0].strip(): [cell.strip() for cell in row[1:]] for row in cells}


def test_the_fleet_shows_both_and_gitopsd_over_flux() -> None:
    shown = rows("\n".join(report.fleet_tables(*fleets())))

    assert shown["all applied after creation"] == ["49.50 s", "194.70 s", "0.25x"]
    assert shown["RSS after the idle window"] == ["210 MiB", "375 MiB", "0.56x"]
    assert shown["peak RSS (VmHWM)"] == ["258 MiB", "404 MiB", "0.64x"]
    assert shown["idle 60 s: CPU"] == ["5.80 s", "62.80 s", "0.09x"]
    assert shown["idle 60 s: API requests"] == ["0", "22,000", "0.00x"]
    assert shown["a commit, no webhook -> all applied"] == ["20.20 s", "207.90 s", "0.10x"]


def test_a_figure_never_reached_shows_so_without_a_ratio() -> None:
    shown = rows("\n".join(report.fleet_tables(*fleets())))

    announced = "a commit, announced -> all applied (gitopsd: one webhook call; Flux: a Receiver's)"
    assert shown[announced] == ["15.50 s", "never", ""]


def test_the_fleets_cpu_is_per_tenant_created_and_per_commit() -> None:
    shown = rows("\n".join(report.fleet_tables(*fleets())))

    assert shown["step"] == ["source-controller", "kustomize-controller", "kube-apiserver", "etcd"]
    assert shown["creation, per tenant"] == ["100 ms"] * 4
    assert shown[POLLED] == ["2.00 s", "8.00 s", "6.00 s", "1.00 s"]


def sources() -> SizeResults:
    result = SizeResults(10_000, "bare")
    daemon = DaemonFigures(cold_start_seconds=37.0, cold_start_requests=20_085)
    daemon.healed, daemon.applied = [0.2, 0.3, 0.4], [0.5]
    daemon.rss, daemon.peak_rss = 180 * MiB, 188 * MiB
    result.daemon.append(daemon)
    noop = Figure(seconds=4.5, requests=50, peak_rss=0)
    result.oneshot.append({("no-op sync", "gitopsd"): noop})
    steps = {
        COLD: Step(148.0, 20_400, CPU),
        NOOP: Step(45.0, 10_100, CPU),
        HEAL: Step(46.0, 10_100, CPU),
        COMMIT: Step(50.0, 10_200, CPU),
    }
    result.flux = FluxSourceFigures(10_000, steps, rss=400 * MiB, peak_rss=500 * MiB)
    return result


def test_one_source_shows_both_and_says_what_flux_waits_for_unasked() -> None:
    result = sources()
    assert result.flux is not None
    shown = rows("\n".join(report.source_tables(result, result.flux)))

    assert shown["cold apply: until applied"] == ["37.00 s", "148.00 s", "0.25x"]
    assert shown["a no-op pass: API requests"] == ["50", "10,100", "0.00x"]
    assert (
        shown["an edit -> corrected, no one asking"][1]
        == "at the next interval (1h here), then 46.00 s"
    )
    assert shown["RSS once done"] == ["180 MiB", "400 MiB", "0.45x"]


def test_without_flux_there_is_no_section() -> None:
    ours, _ = fleets()

    assert report.section([SizeResults(1000, "bare")], ours, None) == ""
    assert report.section([sources()], ours, None).startswith("## Beside Flux")


def kustomization(ready: str, applied_at: str) -> dict[str, object]:
    ready_condition = {"type": "Ready", "status": ready}
    return {"status": {"conditions": [ready_condition], "lastAppliedRevision": applied_at}}


@pytest.mark.parametrize(
    ("ready", "applied_at", "counted"),
    [
        ("True", "main@sha1:b", True),
        ("Unknown", "main@sha1:b", True),  # a later pass in progress: b stays applied
        ("False", "main@sha1:b", False),  # a pass failed since
        ("True", "main@sha1:a", False),  # an earlier commit
    ],
)
def test_a_kustomization_counts_as_applied_from_its_last_applied_revision(
    ready: str, applied_at: str, counted: bool
) -> None:
    assert applied(kustomization(ready, applied_at), "main@sha1:b") is counted
