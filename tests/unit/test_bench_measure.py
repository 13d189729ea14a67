"""The benchmark's peak memory of a child is the child's own, whatever this process holds."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.bench.measure import run

MiB = 2**20


def test_a_childs_peak_rss_is_its_own_not_what_it_shared_before_exec(tmp_path: Path) -> None:
    ballast = bytearray(200 * MiB)  # this process, as large as a benchmark that generated 10k
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident, page by page
    small = [sys.executable, "-c", "import time; time.sleep(0.5)"]
    large = [sys.executable, "-c", "import time; b = bytearray(100 * 2**20); time.sleep(0.5)"]

    quiet = run(small, tmp_path / "small.log", 30, [0])
    busy = run(large, tmp_path / "large.log", 30, [0])

    assert quiet.peak_rss < 50 * MiB  # ru_maxrss said 200 MiB and more
    assert busy.peak_rss > 100 * MiB
    del ballast
