"""A chart's versions as a repository offers them, and the one a source's range picks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.policy import mask_url
from gitopsd.versions import Range, Version, parse_range, parse_version

T = TypeVar("T")

_CREATED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$")


@dataclass(frozen=True)
class Release:
    """One version of the chart: where its archive is, and the sha256 it must have."""

    text: str
    url: str
    digest: str
    """The archive's sha256, hex; for a registry, known once its manifest is read."""
    created: float | None = None

    def shown(self, spec: SourceSpec) -> str:
        return f"chart {spec.helm.chart} {self.text} ({mask_url(self.url)})"


def highest(offered: list[Release], spec: SourceSpec) -> Release:
    """The release of the highest version the source's range allows."""
    wanted = spec.helm.version
    best = highest_version({release.text: release for release in offered}, parse_range(wanted))
    if best is None:
        raise SourceError(
            f"{mask_url(spec.url)}: no version of {spec.helm.chart!r} matches {wanted!r}",
            SourceReason.REF_MISSING,
        )
    return best


def highest_version(offered: Mapping[str, T], wanted: Range) -> T | None:
    """What `offered` holds under the highest version (its key, spelled as semver) that
    `wanted` allows; keys that are no version are passed over."""
    versions: dict[tuple[Any, ...], tuple[Version, T]] = {}
    for text, item in offered.items():
        version = parse_version(text)
        if version is not None:
            versions[version.key()] = (version, item)
    best = wanted.highest(version for version, _ in versions.values())
    return None if best is None else versions[best.key()][1]


def created_at(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (helm writes nanoseconds; they are dropped)."""
    match = _CREATED.match(str(value)) if value else None
    if match is None:
        return None
    try:
        return datetime.fromisoformat(match.group(1) + match.group(2)).timestamp()
    except ValueError:  # month 13, and the like
        return None
