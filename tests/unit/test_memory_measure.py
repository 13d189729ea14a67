"""A bound test's peak memory of a command is the command's own, whatever pytest holds."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.harness.memory import run_measured

MiB = 2**20


def test_a_commands_peak_is_its_own_and_its_childrens_not_this_process(tmp_path: Path) -> None:
    ballast = bytearray(300 * MiB)  # this process, as large as pytest late in the suite
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident, page by page
    grandchild = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]])"
    large = "b = bytearray(100 * 2**20); import sys; sys.exit(3)"

    quiet = run_measured([sys.executable, "-c", "pass"], tmp_path)
    busy = run_measured([sys.executable, "-c", grandchild, large], tmp_path)

    assert quiet[0] == 0 and quiet[2] < 50  # wait4's ru_maxrss said 300 and more
    assert busy[2] > 100  # the largest of the processes the command waited for
    del ballast
