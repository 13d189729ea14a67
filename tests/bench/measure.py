"""How figures are taken: a child's wall time and peak memory, the API requests the server
logged for a user, and how long a condition took to hold."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness import audit
from tests.harness.controlplane import ControlPlane, spawn

POLL_SECONDS = 0.02
"""How often a latency is sampled: fine enough for sub-second figures, light on 2 cores."""


class BenchError(RuntimeError):
    """A step of the benchmark failed; the message says which, and why."""


@dataclass(frozen=True)
class Exit:
    """A finished child: how long it ran and the most memory it held at once."""

    seconds: float
    peak_rss: int
    """Bytes: the largest resident set of the child, sampled (HighWater)."""


@dataclass(frozen=True)
class Figure:
    """One tool's figures for one step of one run."""

    seconds: float
    requests: int
    peak_rss: int


def run(argv: Sequence[str], log_file: Path, deadline_seconds: float, codes: Sequence[int]) -> Exit:
    """Runs `argv` to its end (its output into `log_file`); fails unless it exits with one
    of `codes` within the deadline. Ctrl-C kills the child before going on."""
    started = time.monotonic()
    child = spawn(list(argv), log_file)
    high_water = HighWater(child.pid)
    timer = threading.Timer(deadline_seconds, child.kill)
    timer.start()
    try:
        _, status, _ = os.wait4(child.pid, 0)
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        timer.cancel()
        peak_rss = high_water.stop()
    seconds = time.monotonic() - started
    child.returncode = code = os.waitstatus_to_exitcode(status)
    if seconds >= deadline_seconds or code not in codes:
        late = seconds >= deadline_seconds
        why = f"ran past its {deadline_seconds:.0f} s deadline" if late else f"exited {code}"
        raise BenchError(f"{' '.join(argv[:4])} … {why}; {log_file} ends:\n{tail(log_file)}")
    return Exit(seconds, peak_rss)


class HighWater:
    """Samples a child's VmHWM, the kernel's peak of its resident set since exec, until it
    exits or is stopped (growth in its last POLL_SECONDS may be missed); or another figure
    of it (`read`), such as its threads. Not wait4's ru_maxrss: Linux counts in it the
    resident set the forked child shared with this process before exec, so every child
    read at least as large as the benchmark itself (152 MiB for each tool once the
    benchmark had generated a set of 10,000 objects)."""

    def __init__(self, pid: int, read: Callable[[int], int] | None = None) -> None:
        self.pid = pid
        self.read = read or (lambda pid: process_status(pid, "VmHWM"))
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, name="high-water", daemon=True)
        self.thread.start()

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak

    def _sample(self) -> None:
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, self.read(self.pid))
            except (OSError, BenchError):
                return  # it exited: a zombie has no memory left to report
            self.done.wait(POLL_SECONDS)


def tail(log_file: Path, characters: int = 3000) -> str:
    return log_file.read_text(errors="replace")[-characters:]


def requests(plane: ControlPlane, user: str, since: float, until: float) -> int:
    """The requests by `user` (an audited one) that the API server received in the window
    (Unix seconds). A watch is logged when it ends, so open watches are not counted."""
    return sum(1 for r in audit.requests(plane, user, since) if r.received < until)


def seconds_until(
    condition: Callable[[], bool],
    started: float,
    deadline_seconds: float,
    step: float = POLL_SECONDS,
) -> float | None:
    """Seconds from `started` (time.monotonic) until `condition` holds, checked every
    `step`; None if it does not hold by the deadline."""
    while not condition():
        if time.monotonic() - started > deadline_seconds:
            return None
        time.sleep(step)
    return time.monotonic() - started


def wait_until(
    condition: Callable[[], bool], what: str, deadline_seconds: float, step: float = 0.2
) -> None:
    """Waits for a state, not a latency: checked less often, so the daemon is left alone."""
    if seconds_until(condition, time.monotonic(), deadline_seconds, step) is None:
        raise BenchError(f"timed out after {deadline_seconds:.0f} s waiting for {what}")


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: with 20 samples, p50 is the 10th and p99 the largest."""
    ordered = sorted(samples)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def process_status(pid: int, field: str) -> int:
    """A size from /proc/PID/status (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise BenchError(f"/proc/{pid}/status has no {field}")


def threads(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")
