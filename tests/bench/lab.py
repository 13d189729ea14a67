"""What every step of the benchmark shares: the cluster, its binaries, the git server, and a
folder for the logs. gitopsd and kubectl are driven as a user drives them: commands in
child processes, as the audited user, so the API server's audit log counts their requests."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.bench.measure import Figure, requests, run
from tests.harness.controlplane import AUDITED_USER, Binaries, ControlPlane
from tests.harness.gitserver import GitServer

Command = tuple[list[str], tuple[int, ...]]
"""An argument list and the exit codes that mean it did its work."""


@dataclass(frozen=True)
class Lab:
    plane: ControlPlane
    binaries: Binaries
    server: GitServer
    workdir: Path

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def measured(self, label: str, commands: Sequence[Command], deadline_seconds: float) -> Figure:
        """Runs `commands` one after another: their time and requests together, and the
        largest peak memory among them."""
        since = time.time()
        exits = [
            run(argv, self.logs / f"{label}-{step}.log", deadline_seconds, codes)
            for step, (argv, codes) in enumerate(commands, start=1)
        ]
        until = time.time()
        return Figure(
            seconds=sum(e.seconds for e in exits),
            requests=requests(self.plane, AUDITED_USER, since, until),
            peak_rss=max(e.peak_rss for e in exits),
        )

    def gitopsd(self, command: str, url: str, name: str) -> list[str]:
        """`gitopsd COMMAND URL` for the source `name`, with a git cache of its own."""
        return [
            sys.executable,
            "-m",
            "gitopsd",
            command,
            url,
            "--allow-insecure-source",
            "--name",
            name,
            "--kubeconfig",
            str(self.plane.audited_kubeconfig),
            "--cache-dir",
            str(self.workdir / "gitopsd-cache" / name),
        ]

    def kubectl(self, *arguments: str, cache: str) -> list[str]:
        """kubectl with a discovery cache of its own per set, warm after its first run."""
        return [
            str(self.binaries.kubectl),
            "--kubeconfig",
            str(self.plane.audited_kubeconfig),
            "--cache-dir",
            str(self.workdir / "kubectl-cache" / cache),
            *arguments,
        ]
