"""A command's peak memory, exactly as the kernel counts it, whatever this process holds.

`os.wait4`'s ru_maxrss of a child started from here is at least this process's own
resident set: Linux starts the child sharing this process's memory (vfork, or fork's copy)
and carries that high-water mark across exec, so a 300 MiB pytest made every child read
300 MiB. A small interpreter in between starts the command instead, and reports its
RUSAGE_CHILDREN: the largest resident set of the command and of every process it waited
for (git, kubectl), over a start that shared only the small interpreter's few MiB."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_MEASURER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_measured(command: list[str], workdir: Path) -> tuple[int, str, float]:
    """Runs `command` (its output discarded): its exit code, its stderr and its peak
    resident set in MiB, the largest of it and of the processes it waited for."""
    with (workdir / "err").open("wb") as err:
        measurer = [sys.executable, "-S", "-c", _MEASURER, *command]
        report = subprocess.run(measurer, stdout=subprocess.PIPE, stderr=err, check=True)
    code, peak_kib = report.stdout.split()
    return int(code), (workdir / "err").read_text(), int(peak_kib) / 1024
