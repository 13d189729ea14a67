"""Renders run boxed (TA-07, and TA-01's class, tenant input run at a cost not known
up front): the `offline` wrapper sets the rlimits the program inherits, and fences the file
system with Landlock to what it is given (tested through helm: a program exec'd after the
fence must be static, as helm and kubectl are). Renders stopped at a bound, and a chart's `$ref`
to a file outside it, are in test_tenant_box.py, through helm and a GitSync."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitopsd import sandbox
from tests.harness.waiting import wait_for

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


def run_boxed(command: list[str], tmp_path: Path) -> sandbox.Finished:
    return sandbox._run(command, tmp_path, tmp_path, {}, 1024)


@pytest.fixture
def quick_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A render's own time bound of 1 s, looked at every 50 ms."""
    monkeypatch.setattr(sandbox, "RENDER_TIMEOUT_SECONDS", 1)
    monkeypatch.setattr(sandbox, "WATCH_SECONDS", 0.05)


@pytest.mark.usefixtures("quick_bounds")
def test_a_render_that_stalls_is_stopped_at_its_own_time_bound(tmp_path: Path) -> None:
    finished = run_boxed(["/bin/sleep", "30"], tmp_path)

    assert finished.expired


@pytest.mark.usefixtures("quick_bounds")
def test_the_time_a_niced_render_waits_for_a_processor_is_not_its_own(tmp_path: Path) -> None:
    """Renders run niced, so on busy cores they wait: a render that spins for 2 s of wall
    time beside a spinner at the daemon's priority, on one core, waits nearly all of it,
    and is not stopped at a 1 s bound of its own time (a bound of wall time stopped renders
    on a busy machine: the cause of TA-01's failures with the other core kept busy)."""
    spin = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 2: pass"
    one_core = ["/usr/bin/taskset", "-c", "0"]
    with subprocess.Popen([*one_core, sys.executable, "-c", "while True: pass"]) as busy:
        try:
            niced = [*one_core, "/usr/bin/nice", "-n", "19", sys.executable, "-c", spin]
            finished = run_boxed(niced, tmp_path)
        finally:
            busy.kill()

    assert not finished.expired and finished.status == 0


def test_a_process_that_waited_for_a_processor_says_how_long(tmp_path: Path) -> None:
    one_core = ["/usr/bin/taskset", "-c", "0"]
    with (
        subprocess.Popen([*one_core, sys.executable, "-c", "while True: pass"]) as busy,
        subprocess.Popen(
            [*one_core, "/usr/bin/nice", "-n", "19", sys.executable, "-c", "while True: pass"]
        ) as niced,
    ):
        try:
            wait_for(
                lambda: sandbox.waited_for_a_processor(niced.pid) >= 0.5,
                "the niced spinner to have waited half a second",
                10,
            )
        finally:
            busy.kill()
            niced.kill()

    assert sandbox.waited_for_a_processor(2**22 + 1) == 0.0  # no such process


def test_the_time_a_cpu_limit_holds_a_process_is_waiting_too() -> None:
    """A pod's CPU limit (a CFS quota) stops the daemon's renders too: not their own time."""
    with (
        _cpu_quota(f"gitopsd-test-{os.getpid()}", percent=20) as quota,
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) as spinner,  # waited for
    ):
        try:
            (quota / "cgroup.procs").write_text(str(spinner.pid))
            wait_for(
                lambda: sandbox.waited_for_a_processor(spinner.pid) >= 0.5,
                "the spinner held by its quota for half a second",
                10,
            )
        finally:
            spinner.kill()


@contextmanager
def _cpu_quota(name: str, percent: int) -> Iterator[Path]:
    """A cgroup of the processor controller allowed `percent` of one processor (v1 or v2),
    removed afterwards, whatever happened (its processes ended by then)."""
    v1 = Path("/sys/fs/cgroup/cpu")
    quota = v1 / name if (v1 / "cpu.cfs_quota_us").exists() else Path("/sys/fs/cgroup") / name
    try:
        quota.mkdir()
    except OSError as error:
        pytest.skip(f"no cgroup to hold a CPU quota here: {error}")
    try:
        try:
            if quota.parent == v1:
                (quota / "cpu.cfs_quota_us").write_text(str(percent * 1000))
            else:
                (quota / "cpu.max").write_text(f"{percent * 1000} 100000")
        except OSError as error:
            pytest.skip(f"no CPU quota can be set here: {error}")
        yield quota
    finally:
        quota.rmdir()
