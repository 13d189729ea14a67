"""Runs the gitopsd command line in-process, as a user would type it, and captures its output."""

from __future__ import annotations

import contextlib
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsd.cli import main
from tests.harness import contract
from tests.harness.controlplane import Binaries, ControlPlane


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err

    def document(self, kind: str | None = None) -> dict[str, Any]:
        """The output as `-o json` prints it, checked against its kind's schema."""
        return contract.parsed(self.out, kind)


@dataclass(frozen=True)
class Gitopsd:
    """gitopsd pointed at the test control plane, with its own checkout cache."""

    plane: ControlPlane
    cache: Path
    binaries: Binaries

    def __call__(self, *arguments: str) -> Run:
        command, *rest = arguments
        own = command == "validate" or "--kubeconfig" in rest
        cluster = [] if own else ["--kubeconfig", str(self.plane.kubeconfig)]
        reads_git = command in ("validate", "build", "diff", "sync")
        cache = ["--cache-dir", str(self.cache)] if reads_git else []
        return offline(command, *rest, *cache, *cluster)

    def kubectl(self, *arguments: str) -> str:
        """Runs the real kubectl against the test control plane (out-of-band edits)."""
        done = subprocess.run(
            [str(self.binaries.kubectl), "--kubeconfig", str(self.plane.kubeconfig), *arguments],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(arguments)}: {done.stderr}")
        return done.stdout


def offline(*arguments: str) -> Run:
    """The command line in-process, as given: for a command that needs no cluster."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(arguments))
    return Run(code, out.getvalue(), err.getvalue())


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_files(name: str) -> dict[str, str]:
    """The files of examples/NAME as {relative path: content}, ready for GitRepo.commit."""
    folder = EXAMPLES / name
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
