"""A repository of the test git server as a source names it (file://), and what its
fetches leave on disk: the files of a checkout, the bare repository in the cache."""

from __future__ import annotations

from pathlib import Path

from gitopsd.config import SourceSpec
from tests.harness.gitserver import GitRepo, GitServer


def file_spec(server: GitServer, repo: GitRepo, ref: str = "HEAD") -> SourceSpec:
    return SourceSpec(url=server.file_url(repo), ref=ref, allow_insecure=True, timeout_seconds=30)


def tree(root: Path) -> dict[str, str]:
    """The checked-out files (not .git) as relative posix path -> content."""
    files = (p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts)
    return {p.relative_to(root).as_posix(): p.read_text() for p in files}


def cached_repository(cache: Path) -> Path:
    """The one bare repository a test's fetches keep in the cache."""
    (repository,) = cache.glob("*.git")
    return repository
