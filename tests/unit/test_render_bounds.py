"""Renders run boxed (TA-07, and TA-01's class, tenant input run at a cost not known
up front): the `offline` wrapper sets the rlimits the program inherits, and fences the file
system with Landlock to what it is given (tested through helm: a program exec'd after the
fence must be static, as helm and kubectl are). Renders stopped at a bound, and a chart's `$ref`
to a file outside it, are in test_tenant_box.py, through helm and a GitSync."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitopsd import sandbox

SHELL = "/bin/sh"


def offline(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-I", "-S", str(sandbox.OFFLINE), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_wrapper_sets_the_limits_the_program_inherits() -> None:
    limits = ["--address-space=536870912", "--cpu-seconds=7", "--"]
    shown = offline(*limits, SHELL, "-c", "ulimit -v; ulimit -t").stdout.split()
    assert shown == [str(512 * 1024), "7"]  # ulimit -v counts KiB


def test_the_wrapper_runs_the_program_at_a_lower_priority() -> None:
    """A tenant's render at its CPU bound yields the processor to the daemon's own threads
    (heals of other tenants): the program inherits the niceness."""
    shown = offline(f"--niceness={sandbox.RENDER_NICENESS}", "--", SHELL, "-c", "nice").stdout
    assert int(shown) >= sandbox.RENDER_NICENESS


def test_every_render_asks_for_the_lower_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What sandbox.run starts: the wrapper, told the niceness (the fence lets only a static
    program such as helm run, so the command is read rather than run here)."""
    started: list[list[str]] = []

    def record(command: list[str], *_: object) -> sandbox.Finished:
        started.append(command)
        return sandbox.Finished(0, b"", "", expired=False)

    monkeypatch.setattr(sandbox, "_run", record)
    sandbox.run([SHELL], 1024, lambda home: {}, "render", [], "team", cwd=tmp_path)
    wrapper_options = started[0][: started[0].index("--")]
    assert f"--niceness={sandbox.RENDER_NICENESS}" in wrapper_options
