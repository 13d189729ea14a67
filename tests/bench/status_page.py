"""`python -m tests.bench.status_page [--sources N]`: how long the status page takes to
render its overview of N sources (1,000 by default) and one source's page at its bounds
(50 drifted objects of 20 fields, 10 syncs), pure rendering, no daemon. Prints the median
and the slowest of a few runs; docs/daemon.md quotes it. Not part of `make bench`: the
page is rendered only when someone looks at it."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from gitopsd.diff import Drift, FieldChange, State
from gitopsd.objects import ObjectKey
from gitopsd.pages import SourceDetail, SourceLine, overview, source_page
from gitopsd.pages.source import MAX_FIELDS, MAX_OBJECTS, MAX_SYNCS

RUNS = 15


def lines(count: int) -> list[SourceLine]:
    """GitSyncs as a fleet's overview lists them, long messages included."""
    return [
        SourceLine(
            name=f"team-{n % 50:02}/app-{n:05}",
            revision=f"{n:040x}",
            last_sync="2026-01-01T00:00:00Z",
            ready="False" if n % 10 == 0 else "True",
            outcome="DriftDetected" if n % 10 == 0 else "Succeeded",
            health="Current",
            drifted=1 if n % 10 == 0 else 0,
            message="1 object differs from git (1 modified): " + "x" * 400,
        )
        for n in range(count)
    ]


def detail() -> SourceDetail:
    changes = tuple(
        FieldChange(f"data.k{n}", "live" * 100, "git" * 100, "kubectl-edit")
        for n in range(MAX_FIELDS)
    )
    drifts = [
        Drift(ObjectKey("", "ConfigMap", "team", f"c{n}"), State.MODIFIED, changes)
        for n in range(MAX_OBJECTS)
    ]
    history = [
        {"revision": "a" * 40, "startedAt": "2026-01-01T00:00:00Z", "outcome": "Succeeded"}
    ] * MAX_SYNCS
    return SourceDetail(lines(1)[0], drifts, history)


def timed(render: Callable[[], str]) -> tuple[float, float, int]:
    """Median and slowest milliseconds of RUNS renders, and the page's size in bytes."""
    seconds, page = [], ""
    for _ in range(RUNS):
        started = time.perf_counter()
        page = render()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds) * 1000, max(seconds) * 1000, len(page.encode())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.status_page")
    parser.add_argument("--sources", type=int, default=1000)
    count = parser.parse_args().sources
    fleet, one = lines(count), detail()
    for what, render in (
        (f"overview of {count} sources", lambda: overview(fleet, 10)),
        ("a source's page at its bounds", lambda: source_page(one, 10)),
    ):
        median, slowest, size = timed(render)
        print(f"{what}: median {median:.1f} ms, slowest {slowest:.1f} ms, {size} bytes")


if __name__ == "__main__":
    main()
