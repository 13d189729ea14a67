"""The daemon's bounds on the disk its sources' charts take (`chartCache:`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


KEYS = {"maxBytes", "maxBytesPerNamespace"}


def chart_cache(value: Any, where: str) -> ChartCacheSettings:
    raw = mapping(value or {}, where, KEYS)
    default = ChartCacheSettings()
    return ChartCacheSettings(
        max_bytes=_size(raw, "maxBytes", where, default.max_bytes),
        max_bytes_per_namespace=_size(
            raw, "maxBytesPerNamespace", where, default.max_bytes_per_namespace
        ),
    )


def _size(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    return size(raw, key, where) if key in raw else default
