"""The harness's memory cage bounds what a process may hold, as a pod's memory limit does:
the daemon's tenant tests (TA-01..TA-03) rest on it."""

from __future__ import annotations

import subprocess
import sys

from tests.harness.memory_cage import MemoryCage

_HOLD = (
    "import sys\n"
    "held = bytearray(int(sys.argv[1]) << 20)\n"
    "held[::4096] = b'x' * (len(held) // 4096)  # touched, so charged\n"
)


def _run_holding(cage: MemoryCage, mib: int) -> int:
    argv = cage.wrap([sys.executable, "-S", "-c", _HOLD, str(mib)])
    return subprocess.run(argv, capture_output=True, check=False, timeout=60).returncode


def test_a_process_within_its_cage_runs_and_one_beyond_it_is_stopped() -> None:
    cage = MemoryCage.create(96)
    try:
        assert _run_holding(cage, 16) == 0
        assert _run_holding(cage, 1024) != 0, f"a {cage.kind} cage of 96 MiB let 1 GiB through"
        if cage.kind == "cgroup":
            assert cage.oom_kills() >= 1
            assert 16 <= cage.peak_mib() <= 96 + 1
    finally:
        cage.close()
