"""Renders run under a memory and a CPU bound (issue 50, of TA-01's class: tenant input run
at a cost not known up front): the `offline` wrapper sets the rlimits the program inherits,
and a render stopped at one fails naming the bound and its setting."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitopsd import sandbox
from gitopsd.errors import ManifestError
from gitopsd.health.expressions import evaluate_with, in_process
from gitopsd.sandbox_bounds import SandboxBounds

SHELL = "/bin/sh"


@pytest.fixture
def tight() -> Iterator[SandboxBounds]:
    bounds = SandboxBounds(render_memory_bytes=512 << 20, render_cpu_seconds=1)
    sandbox.bound_everything(bounds)
    yield bounds
    sandbox.bound_everything(SandboxBounds())
    evaluate_with(in_process)


def test_the_wrapper_sets_the_limits_the_program_inherits() -> None:
    limits = ["--address-space=536870912", "--cpu-seconds=7", "--"]
    program = [SHELL, "-c", "ulimit -v; ulimit -t"]
    command = [sys.executable, "-I", "-S", str(sandbox.OFFLINE), *limits, *program]
    shown = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
    assert shown == [str(512 * 1024), "7"]  # ulimit -v counts KiB


def test_a_render_past_the_cpu_bound_fails_naming_it(tight: SandboxBounds) -> None:
    finished = sandbox.run([SHELL, "-c", "while :; do :; done"], 1024, lambda home: {}, "spin")
    with pytest.raises(ManifestError) as failed:
        sandbox.output_of(finished, "spin", 1024, [], Path("/"))
    assert str(failed.value) == (
        "spin was stopped at the render CPU bound, 1 s of processor time (sandbox.renderCPU)"
    )


def test_a_render_out_of_memory_fails_naming_the_bound(tight: SandboxBounds) -> None:
    go_dies = "echo 'fatal error: out of memory' >&2; exit 2"  # as Go's runtime says it
    finished = sandbox.run([SHELL, "-c", go_dies], 1024, lambda home: {}, "bomb")
    with pytest.raises(ManifestError) as failed:
        sandbox.output_of(finished, "bomb", 1024, [], Path("/"))
    assert str(failed.value) == (
        "bomb ran out of memory: over the render memory bound, 512Mi of address space "
        "(sandbox.renderMemory)"
    )
