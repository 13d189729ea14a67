"""The daemon's bounds on the disk its sources' charts and git repositories take
(`chartCache:`, `gitCache:`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from gitopsd.configfile.fields import mapping, size
from gitopsd.quantities import GiB, MiB


@dataclass(frozen=True)
class ChartCacheSettings:
    """What the unpacked charts sources hold may take of the cache directory. The shipped
    pod's cache volume is 4 GiB: the rest is for git repositories and renders."""

    max_bytes: int = 2 * GiB
    """All of them together."""
    max_bytes_per_namespace: int = 512 * MiB
    """Those a tenant's sources hold (a GitSync's namespace; the configuration's sources are
    one tenant), each counted in full however many tenants share it: a fair share of
    `max_bytes`, so one tenant at its bound leaves the others room."""


@dataclass(frozen=True)
class GitCacheSettings:
    """What the git repositories sources read may take of the cache directory: with the
    charts' 2 GiB, 3 GiB of the shipped pod's 4 GiB, the rest for renders and snapshots."""

    max_bytes: int = 1 * GiB
    """All of them together."""
    max_bytes_per_namespace: int = 256 * MiB
    """Those a tenant's sources read, each counted in full however many tenants read it."""


KEYS = {"maxBytes", "maxBytesPerNamespace"}
Bounds = TypeVar("Bounds", ChartCacheSettings, GitCacheSettings)


def chart_cache(value: Any, where: str) -> ChartCacheSettings:
    return _read(ChartCacheSettings, value, where)


def git_cache(value: Any, where: str) -> GitCacheSettings:
    return _read(GitCacheSettings, value, where)


def _read(settings: type[Bounds], value: Any, where: str) -> Bounds:
    raw = mapping(value or {}, where, KEYS)
    default = settings()
    return settings(
        max_bytes=size(raw, "maxBytes", where, default.max_bytes),
        max_bytes_per_namespace=size(
            raw, "maxBytesPerNamespace", where, default.max_bytes_per_namespace
        ),
    )
