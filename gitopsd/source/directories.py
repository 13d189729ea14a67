"""The directories of a revision, for a GitSyncSet's git generator: listed from the object
store (`git ls-tree -d`, trees only, no file read), streamed, and refused past a bound
before git has written them all, as a listing of a source's paths is (`listing`)."""

from __future__ import annotations

import os
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.source.policy import mask_url
from gitopsd.source.repository import ensure_commit, locked, recovering
from gitopsd.source.revision import Revision
from gitopsd.source.runner import Runner, open_runner


def directories(spec: SourceSpec, cache_dir: Path, revision: Revision, most: int) -> list[str]:
    """Every directory of `revision` (its path from the root), sorted; raises ManifestError
    when it holds more than `most`."""
    runner = open_runner(spec, cache_dir)
    with locked(runner):
        return recovering(runner, lambda r: _listed(r, revision.sha, most))


def _listed(runner: Runner, sha: str, most: int) -> list[str]:
    ensure_commit(runner, sha)
    found: list[str] = []
    command = ("ls-tree", "-r", "-d", "-z", "--name-only", "--full-tree", sha)
    with runner.records(*command) as records:
        for record in records:
            found.append(os.fsdecode(record))
            if len(found) > most:
                raise ManifestError(
                    f"git source {mask_url(runner.spec.url)}: revision {sha[:12]} holds more "
                    f"than {most} directories, the most a GitSyncSet's git generator scans",
                    ManifestReason.SIZE_LIMIT,
                )
    return sorted(found)
