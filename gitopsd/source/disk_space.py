"""What the caches on disk (`chart_cache`, `git_cache`) measure and give back: the bytes a
directory holds, and a directory removed so that no reader meets it half gone."""

from __future__ import annotations

import shutil
import time
from pathlib import Path


def bytes_under(directory: Path) -> int:
    """The bytes of the files below `directory`; 0 once it is removed meanwhile."""
    try:
        return sum(path.lstat().st_size for path in directory.rglob("*") if path.is_file())
    except OSError:
        return 0


def remove_out_of_sight(path: Path, prefix: str) -> None:
    """Renames `path` at once to a name starting with `prefix` (which the cache's start-up
    skips), then removes it: a reader that looks for it anew finds nothing and makes it
    afresh."""
    trash = path.with_name(f"{prefix}{path.name}-{time.monotonic_ns()}")
    try:
        path.rename(trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)
