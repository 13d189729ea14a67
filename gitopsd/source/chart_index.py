"""A Helm chart repository over HTTP(S): `index.yaml` lists every chart's versions, each
with its archive's URLs and sha256 digest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import yaml

from gitopsd.config import Limits, SourceSpec, how_to_raise
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.download import Downloads
from gitopsd.source.policy import mask_url
from gitopsd.source.releases import Release, created_at, highest

INDEX = "index.yaml"
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_FIELDS = ("version", "digest", "created")
"""An entry's fields read besides its URLs: the rest (descriptions, maintainers, icons,
dependencies) is only read past."""


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

    def _index(self) -> bytes:
        what = f"{self.shown}: {INDEX}"
        return self.downloads.get(urljoin(self.base, INDEX), what, bound="max_listing_bytes").body


def pick(index: bytes, spec: SourceSpec) -> Release:
    """The highest version of the chart the range allows, from the index's text."""
    name, most = spec.helm.chart or "", spec.limits.max_versions
    shown = f"chart repository {mask_url(spec.url)}"
    try:
        versions = chart_entries(index, name, most)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SourceError(f"{shown}: {INDEX}{where}: not YAML", SourceReason.CORRUPT) from None
    except _TooMany:
        raise SourceError(
            f"{shown}: {INDEX} lists more than {most} versions of {name!r} "
            f"({how_to_raise('max_versions')})",
            SourceReason.TOO_LARGE,
        ) from None
    if not versions:
        raise SourceError(f"{shown} has no chart {name!r}", SourceReason.REF_MISSING)
    return highest(list(_releases(versions, spec)), spec)


def chart_entries(index: bytes, name: str, most: int = Limits.max_versions) -> list[Any]:
    """`entries[name]` of the index, read as a stream of parse events: only that chart's
    entries are built (an index of every chart of a large repository costs no memory for
    the others), and of each only what a release needs (`_FIELDS`, each a string, the
    first URL only), so an entry costs a bounded amount whatever the index holds; an
    alias is nothing. More than `most` entries raise _TooMany."""
    events = yaml.parse(index, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for event in events:
        if isinstance(event, yaml.MappingStartEvent):  # the document's root
            for key in _keys(events):
                if key != "entries":
                    _skip(events)
                    continue
                start = next(events)
                if not isinstance(start, yaml.MappingStartEvent):
                    _skip_after(start, events)
                    return []
                for chart in _keys(events):
                    if chart == name:
                        return _versions(next(events), events, most)
                    _skip(events)
            return []
        if isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent)):
            return []
    return []


class _TooMany(Exception):
    """The chart's entries outnumber the version limit."""


def _versions(first: yaml.Event, events: Iterator[yaml.Event], most: int) -> list[Any]:
    """The chart's entries (None for one that is no mapping), up to `most` of them."""
    if not isinstance(first, yaml.SequenceStartEvent):
        _skip_after(first, events)
        return []
    found: list[Any] = []
    for event in events:
        if isinstance(event, yaml.SequenceEndEvent):
            break
        if len(found) == most:
            raise _TooMany
        found.append(_entry(event, events))
    return found


def _entry(first: yaml.Event, events: Iterator[yaml.Event]) -> dict[str, Any] | None:
    if not isinstance(first, yaml.MappingStartEvent):
        _skip_after(first, events)
        return None
    entry: dict[str, Any] = {}
    for key in _keys(events):
        value = next(events)
        if key == "urls":
            entry[key] = _first_url(value, events)
        elif key in _FIELDS and isinstance(value, yaml.ScalarEvent):
            entry[key] = value.value
        else:
            _skip_after(value, events)
    return entry


def _first_url(first: yaml.Event, events: Iterator[yaml.Event]) -> list[str]:
    """The first of a list of URLs, if it is a string; the others are only read past."""
    if not isinstance(first, yaml.SequenceStartEvent):
        _skip_after(first, events)
        return []
    urls: list[str] = []
    for event in events:
        if isinstance(event, yaml.SequenceEndEvent):
            break
        if not urls and isinstance(event, yaml.ScalarEvent):
            urls.append(event.value)
        else:
            _skip_after(event, events)
    return urls


def _keys(events: Iterator[yaml.Event]) -> Iterator[str | None]:
    """The keys of the mapping being read, up to its end; the caller reads each value."""
    for event in events:
        if isinstance(event, yaml.MappingEndEvent):
            return
        if isinstance(event, yaml.ScalarEvent):
            yield event.value
        else:  # a complex key: skipped with its value
            _skip_after(event, events)
            _skip(events)


def _skip(events: Iterator[yaml.Event]) -> None:
    _skip_after(next(events), events)


def _skip_after(first: yaml.Event, events: Iterator[yaml.Event]) -> None:
    """Reads past the node `first` starts."""
    depth = 1 if isinstance(first, (yaml.MappingStartEvent, yaml.SequenceStartEvent)) else 0
    while depth:
        event = next(events)
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


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
