"""What a figure was measured on: the machine, the Python, the control plane, the commit."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from tests.harness.controlplane import Binaries

REPOSITORY = Path(__file__).resolve().parents[2]


def describe(binaries: Binaries) -> str:
    cpu = _cpuinfo("model name") or platform.processor() or "unknown CPU"
    return (
        f"{cpu}, {os.cpu_count()} cores, {_memory_gib():.1f} GiB memory, "
        f"Python {platform.python_version()}, "
        f"kube-apiserver {_version(binaries.kube_apiserver, '--version')}, "
        f"etcd {_version(binaries.etcd, '--version')}, "
        f"kubectl {_version(binaries.kubectl, 'version', '--client')}, "
        f"kwok {_version(binaries.controllers.kwok, '--version')}"
    )


def gitopsd_revision() -> str:
    """The commit measured, marked when gitopsd/ had changes not yet committed."""
    sha = _output("git", "rev-parse", "--short", "HEAD")
    changed = _output("git", "status", "--porcelain", "--", "gitopsd")
    return f"{sha} with uncommitted changes to gitopsd/" if changed else sha


def _cpuinfo(key: str) -> str | None:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return None


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def _version(binary: Path, *arguments: str) -> str:
    """The first word of what a binary reports that reads as a version (v1.34.4, 3.6.16)."""
    words = _output(str(binary), *arguments).split()
    return next(word for word in words if re.fullmatch(r"v?\d+\.\d+\.\d+", word))


def _output(*argv: str) -> str:
    done = subprocess.run(argv, cwd=REPOSITORY, capture_output=True, text=True, check=True)
    return done.stdout.strip()
