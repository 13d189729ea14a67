"""`python -m tests.bench.versus REV REV... [--size N] [--rounds R]`: the daemon of each git
revision measured on one control plane, in turns (the first, the second, ..., then again
R times), and each figure's median by revision. One run of a daemon figure moves by about
30% from the next on this machine class, and more from one day to the next: a single `make
bench` against BENCHMARKS.md cannot tell a slowdown from a slow day (2026-12-06: rollout CPU
1.31 s against 650 ms, then five turns gave medians of 369 and 385 µs an event). Turns on one
control plane can. This tree's harness drives each revision's daemon (checked out by `git
archive`, imported through PYTHONPATH), so a revision must read the configuration the
harness writes. Not part of `make bench`."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.bench.daemon import DaemonFigures, measure_daemon
from tests.bench.lab import Lab
from tests.bench.measure import percentile
from tests.harness.controlplane import provide_binaries, running_control_plane
from tests.harness.gitserver import GitServer

Figure = Callable[[DaemonFigures], float | None]
FIGURES: dict[str, Figure] = {
    "cold start, ms": lambda f: f.cold_start_seconds * 1000,
    "RSS once settled, MiB": lambda f: f.settled_rss / 2**20,
    "rollout CPU an event, µs": lambda f: (
        f.rollout_cpu_seconds / max(sum(f.rollout_events.values()), 1) * 1e6
    ),
    "edit -> heal p50, ms": lambda f: _p50(f.healed),
    "commit -> applied p50, ms": lambda f: _p50(f.applied),
}


def main() -> int:
    options = parser().parse_args()
    with tempfile.TemporaryDirectory(prefix="gitopsd-versus-") as temporary:
        workdir = options.workdir or Path(temporary)
        trees = {
            revision: checked_out(revision, workdir / f"tree-{n}")
            for n, revision in enumerate(options.revisions)
        }
        figures = measured(trees, options.size, options.rounds, workdir)
    print(table(figures))
    return 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.versus", description=__doc__)
    parser.add_argument("revisions", nargs="+", metavar="REV", help="git revisions to compare")
    parser.add_argument("--size", type=int, default=5000, help="objects of each set (5000)")
    parser.add_argument("--rounds", type=int, default=3, help="turns of each revision (3)")
    parser.add_argument("--workdir", type=Path, help="keep the trees, cluster and logs here")
    return parser


def checked_out(revision: str, tree: Path) -> Path:
    """`revision`'s files in `tree`, without touching the repository's worktrees."""
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def measured(
    trees: dict[str, Path], size: int, rounds: int, workdir: Path
) -> dict[str, list[DaemonFigures]]:
    binaries = provide_binaries()
    figures: dict[str, list[DaemonFigures]] = {revision: [] for revision in trees}
    with running_control_plane(binaries, workdir / "cluster", with_controllers=False) as plane:
        (workdir / "git").mkdir()
        lab = Lab(plane, binaries, GitServer(root=workdir / "git"), workdir)
        lab.logs.mkdir()
        for turn in range(rounds):
            for number, (revision, tree) in enumerate(trees.items()):
                print(f"versus: {revision}, turn {turn + 1} of {rounds}", flush=True)
                os.environ["PYTHONPATH"] = str(tree)  # the daemon inherits it: its revision
                tag = f"v{turn}r{number}"
                figures[revision].append(
                    measure_daemon(lab, size, tag, edits=6, commits=3, idle_seconds=5, rollout=True)
                )
    return figures


def table(figures: dict[str, list[DaemonFigures]]) -> str:
    """A row per figure: each revision's median, and its runs."""
    header = "| figure | " + " | ".join(figures) + " |"
    rows = [header, "|---" * (len(figures) + 1) + "|"]
    for name, figure in FIGURES.items():
        cells = [_cell([figure(f) for f in runs]) for runs in figures.values()]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cell(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "none"
    runs = ", ".join(f"{v:.0f}" for v in known)
    return f"**{statistics.median(known):.0f}** ({runs})"


def _p50(seconds: Sequence[float | None]) -> float | None:
    known = [s for s in seconds if s is not None]
    return percentile(known, 0.5) * 1000 if known else None


if __name__ == "__main__":
    raise SystemExit(main())
