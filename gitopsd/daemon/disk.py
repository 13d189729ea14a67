"""The daemon's records of what its sources hold on disk, each within the admin's bounds:
the unpacked charts and the git repositories under each of the cache's roots (the
configuration's sources', and the GitSyncs' of each set of credentials), those left by an
earlier process included."""

from __future__ import annotations

from pathlib import Path

from gitopsd.configfile import DaemonConfig
from gitopsd.source import ChartCache, FetchLedger, GitCache


def chart_cache(config: DaemonConfig) -> ChartCache:
    bounds = config.chart_cache
    return ChartCache(bounds.max_bytes, bounds.max_bytes_per_namespace, _roots(config))


def fetch_ledger(config: DaemonConfig) -> FetchLedger:
    """The record of the sources' fetches, which tells the git cache who reads what."""
    bounds = config.git_cache
    git = GitCache(bounds.max_bytes, bounds.max_bytes_per_namespace, _roots(config))
    return FetchLedger(git=git)


def _roots(config: DaemonConfig) -> list[Path]:
    gitsyncs = config.cache_dir / "gitsyncs" / "repositories"
    return [
        config.cache_dir / "sources",
        *(sorted(gitsyncs.iterdir()) if gitsyncs.is_dir() else []),
    ]
