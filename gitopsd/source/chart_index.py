"""A Helm chart repository over HTTP(S): `index.yaml` lists every chart's versions, each
with its archive's URLs and sha256 digest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import yaml

from gitopsd.config import SourceSpec
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.download import Downloads
from gitopsd.source.policy import mask_url
from gitopsd.source.releases import Release, created_at, highest

INDEX = "index.yaml"
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class ChartIndex:
    """The chart repository at the source's URL."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self.base = spec.url.rstrip("/") + "/"
        self.downloads = Downloads(spec, spec.url)
        self.shown = f"chart repository {mask_url(spec.url)}"

    def release(self) -> Release:
        """The highest version of the chart the source's range allows."""
        return pick(self._index(), self.spec)

    def archive(self, release: Release) -> bytes:
        return self.downloads.get(release.url, release.shown(self.spec)).body

    def _index(self) -> dict[Any, Any]:
        data = self.downloads.get(urljoin(self.base, INDEX), f"{self.shown}: {INDEX}").body
        try:
            parsed = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise SourceError(
                f"{self.shown}: {INDEX}{where}: not YAML", SourceReason.CORRUPT
            ) from None
        return parsed if isinstance(parsed, dict) else {}


def pick(index: dict[Any, Any], spec: SourceSpec) -> Release:
    """The highest version of the chart the range allows, from the parsed index."""
    name = spec.helm.chart or ""
    entries = index.get("entries") if isinstance(index, dict) else None
    versions = entries.get(name) if isinstance(entries, dict) else None
    if not isinstance(versions, list) or not versions:
        raise SourceError(
            f"chart repository {mask_url(spec.url)} has no chart {name!r}", SourceReason.REF_MISSING
        )
    return highest(list(_releases(versions, spec)), spec)


def _releases(versions: list[Any], spec: SourceSpec) -> Iterator[Release]:
    """The index's entries that name a version, a URL and a digest (others are skipped)."""
    base = spec.url.rstrip("/") + "/"
    for entry in versions:
        if not isinstance(entry, dict):
            continue
        text, urls, digest = entry.get("version"), entry.get("urls"), entry.get("digest")
        if not isinstance(text, str) or not isinstance(urls, list) or not urls:
            continue
        if not isinstance(urls[0], str) or not isinstance(digest, str) or not _DIGEST.match(digest):
            continue
        yield Release(text, urljoin(base, urls[0]), digest, created_at(entry.get("created")))
