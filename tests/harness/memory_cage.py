"""A memory limit around one process, as the Deployment's `resources.limits.memory` is:
a memory cgroup of its own, whose overrun the kernel answers with the OOM killer.

The kernel's cgroup (v1's memory controller or v2's memory.max) is the same bound the
kubelet sets, so a test that the daemon lives inside it is a claim about the pod. Where
no memory cgroup is writable (an unprivileged CI runner), the cage falls back to an
address-space limit (RLIMIT_AS) of a few times the size: an overrun is then a failed
allocation instead of a kill, and `kind` says which of the two a test ran under."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

_CGROUP_V1 = Path("/sys/fs/cgroup/memory")
_CGROUP_V2 = Path("/sys/fs/cgroup")

_ENTER = """
import os, resource, sys
procs, limit = sys.argv[1], int(sys.argv[2])
if procs:
    with open(procs, "w") as cgroup:
        cgroup.write(str(os.getpid()))
else:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
os.execv(sys.argv[3], sys.argv[3:])
"""

ADDRESS_SPACE_FACTOR = 4
"""A Python process maps several times what it touches (thread stacks, arenas): an
address-space limit of the cgroup's size would fail allocations the pod never fails."""


@dataclass
class MemoryCage:
    """A memory cgroup limited to `limit_mib` (or the fallback), for the processes started
    through `wrap`; `close` removes it."""

    limit_mib: int
    directory: Path | None

    @classmethod
    def create(cls, limit_mib: int) -> MemoryCage:
        for directory in _candidates():
            with contextlib.suppress(OSError):
                directory.mkdir()
                _write_limit(directory, limit_mib << 20)
                return cls(limit_mib, directory)
            with contextlib.suppress(OSError):
                directory.rmdir()
        return cls(limit_mib, None)

    @property
    def kind(self) -> str:
        return "cgroup" if self.directory is not None else "rlimit"

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv`, started inside the cage: the process enters it before it execs."""
        procs = str(self.directory / "cgroup.procs") if self.directory else ""
        limit = self.limit_mib * ADDRESS_SPACE_FACTOR << 20
        return [sys.executable, "-S", "-c", _ENTER, procs, str(limit), *argv]

    def oom_kills(self) -> int:
        """How many processes of the cage the kernel's OOM killer has killed (0 under the
        fallback, where an overrun is a failed allocation)."""
        if self.directory is None:
            return 0
        for name in ("memory.events", "memory.oom_control"):
            path = self.directory / name
            if path.exists():
                fields = dict(line.split() for line in path.read_text().splitlines())
                return int(fields.get("oom_kill", 0))
        return 0

    def peak_mib(self) -> float:
        """The most memory the cage has held, as the kernel charges it (0 under the fallback)."""
        if self.directory is None:
            return 0.0
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            path = self.directory / name
            if path.exists():
                return int(path.read_text()) / (1 << 20)
        return 0.0

    def close(self) -> None:
        """Removes the cgroup once its processes are gone."""
        if self.directory is not None:
            with contextlib.suppress(OSError):
                self.directory.rmdir()


def _candidates() -> list[Path]:
    name = f"gitopsd-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    found = []
    if (_CGROUP_V1 / "memory.limit_in_bytes").exists():
        found.append(_CGROUP_V1 / name)
    if "memory" in _read(_CGROUP_V2 / "cgroup.subtree_control"):
        found.append(_CGROUP_V2 / name)
    return found


def _write_limit(directory: Path, limit_bytes: int) -> None:
    v1 = directory / "memory.limit_in_bytes"
    if v1.exists():
        v1.write_text(str(limit_bytes))
        swap = directory / "memory.memsw.limit_in_bytes"
        with contextlib.suppress(OSError):  # absent without swap accounting
            swap.write_text(str(limit_bytes))
        return
    (directory / "memory.max").write_text(str(limit_bytes))
    with contextlib.suppress(OSError):
        (directory / "memory.swap.max").write_text("0")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
