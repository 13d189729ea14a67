"""Sizes and durations as people write them, on the command line and in the configuration
file (64Mi, 2Gi; 1h30m, 2.5s), read and written back. Pure."""

from __future__ import annotations

import re

MiB = 1024 * 1024
GiB = 1024 * MiB

SIZE = re.compile(r"^(\d+)(Ki|Mi|Gi)?$")
SIZE_UNITS = {None: 1, "Ki": 1 << 10, "Mi": MiB, "Gi": GiB}
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_size(text: str) -> int | None:
    """A count of bytes such as 1048576, 512Ki, 64Mi or 1Gi; None when it is not one."""
    match = SIZE.match(text.strip())
    return int(match[1]) * SIZE_UNITS[match[2]] if match else None


def format_size(count: int) -> str:
    """`count` the shortest way parse_size reads it: 3Mi, 2Gi, 1000."""
    for unit, scale in reversed(SIZE_UNITS.items()):
        if unit and count and count % scale == 0:
            return f"{count // scale}{unit}"
    return str(count)


def format_duration(seconds: float) -> str:
    """`seconds` as minutes when whole ones (5m), else as seconds (90s)."""
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"


def parse_duration(text: str) -> float | None:
    match = DURATION.match(text.strip())
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds = (float(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds
