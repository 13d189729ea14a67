"""Renders run boxed (issue 50: TA-07, and TA-01's class, tenant input run at a cost not known
up front): the `offline` wrapper sets the rlimits the program inherits, and fences the file
system with Landlock to what it is given (tested through helm: a program exec'd after the
fence must be static, as helm and kubectl are). Renders stopped at a bound, and a chart's `$ref`
to a file outside it, are in test_tenant_box.py, through helm and a GitSync."""

from __future__ import annotations

import subprocess
import sys

from gitopsd import sandbox

SHELL = "/bin/sh"


def offline(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-I", "-S", str(sandbox.OFFLINE), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_wrapper_sets_the_limits_the_program_inherits() -> None:
    limits = ["--address-space=536870912", "--cpu-seconds=7", "--"]
    shown = offline(*limits, SHELL, "-c", "ulimit -v; ulimit -t").stdout.split()
    assert shown == [str(512 * 1024), "7"]  # ulimit -v counts KiB
