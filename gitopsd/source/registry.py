"""A Helm chart in an OCI registry: its tags are its versions, and each tag's manifest
names the chart archive as a layer, by digest (the OCI distribution API, as `helm push`
stores a chart)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from gitopsd.config import SourceSpec, how_to_raise
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.download import Downloads
from gitopsd.source.policy import mask_url
from gitopsd.source.releases import Release, created_at, highest

CHART_CONFIG = "application/vnd.cncf.helm.config.v1+json"
CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_MAX_TAG_PAGES = 50
_ENVELOPE = 16
"""Values of a tags page or manifest besides its items: its name, keys, annotations."""
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_LAYER_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")


class Registry:
    """The chart `helm.chart` under the repository path of the source's oci:// URL;
    plain HTTP only where insecure sources are allowed (as helm's --plain-http)."""

    def __init__(self, spec: SourceSpec) -> None:
        parts = urlsplit(spec.url)
        host = parts.hostname or ""
        authority = f"[{host}]" if ":" in host else host
        authority += f":{parts.port}" if parts.port else ""
        self.spec = spec
        self.base = f"{'http' if spec.allow_insecure else 'https'}://{authority}"
        self.name = "/".join(part for part in (parts.path.strip("/"), spec.helm.chart) if part)
        self.downloads = Downloads(spec, self.base)
        self.shown = f"registry {mask_url(spec.url)}/{spec.helm.chart}"

    def release(self) -> Release:
        """The highest version the range allows, its archive's digest read from its manifest."""
        tags = [tag for tag in self._tags() if isinstance(tag, str)]
        offered = [Release(tag.replace("_", "+"), self._url("manifests", tag), "") for tag in tags]
        if not offered:
            raise SourceError(f"{self.shown}: no tags", SourceReason.REF_MISSING)
        chosen = highest(offered, self.spec)
        return self._resolved(chosen)

    def archive(self, release: Release) -> bytes:
        shown = release.shown(self.spec)
        return self.downloads.get(release.url, shown, checked_later=True).body

    def _tags(self) -> list[Any]:
        """Every page of tags, each within the listing's byte limit, all of them within
        the version limit: a page is counted before it is parsed."""
        tags: list[Any] = []
        url: str | None = self._url("tags/list")
        most = self.spec.limits.max_versions
        for _ in range(_MAX_TAG_PAGES):
            if url is None:
                break
            what = f"{self.shown}: tags"
            response = self.downloads.get(url, what, bound="max_listing_bytes")
            listed = _json(response.body, what, most - len(tags)).get("tags") or []
            tags += listed if isinstance(listed, list) else []
            if len(tags) > most:
                raise _too_many(what, most)
            following = _NEXT.search(response.headers.get("Link", ""))
            url = urljoin(self.base, following.group(1)) if following else None
        return tags

    def _resolved(self, chosen: Release) -> Release:
        what = f"{self.shown}: {chosen.text}"
        answer = self.downloads.get(chosen.url, what, accept=MANIFEST, bound="max_listing_bytes")
        manifest = _json(answer.body, what, self.spec.limits.max_versions)
        config = manifest.get("config")
        if not isinstance(config, dict) or config.get("mediaType") != CHART_CONFIG:
            raise SourceError(f"{what}: not a Helm chart (its config is not {CHART_CONFIG})")
        layers = [
            layer
            for layer in manifest.get("layers") or []
            if isinstance(layer, dict) and layer.get("mediaType") == CHART_LAYER
        ]
        digest = _LAYER_DIGEST.match(str(layers[0].get("digest"))) if len(layers) == 1 else None
        if digest is None:
            raise SourceError(f"{what}: its manifest names no single sha256 chart layer")
        annotations = manifest.get("annotations")
        created = (
            annotations.get("org.opencontainers.image.created")
            if isinstance(annotations, dict)
            else None
        )
        blob = self._url("blobs", f"sha256:{digest.group(1)}")
        return Release(chosen.text, blob, digest.group(1), created_at(created))

    def _url(self, *parts: str) -> str:
        path = "/".join(quote(part, safe="/:") for part in parts)
        return f"{self.base}/v2/{quote(self.name, safe='/')}/{path}"


def _json(body: bytes, what: str, most: int) -> dict[str, Any]:
    """The JSON object `body` holds, refused unprompted when it may hold more than `most`
    items: parsed JSON costs up to 20 times its text in memory (`[[],[],…]`), counted
    items cost a bounded amount each."""
    if _values_at_most(body) > most + _ENVELOPE:
        raise _too_many(what, most)
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raise SourceError(
            f"{what}: the registry's answer is not a JSON object", SourceReason.CORRUPT
        )
    return parsed


def _values_at_most(body: bytes) -> int:
    """An upper bound on the values of a JSON text, counted on its bytes before parsing:
    every value is the first of its text or array, or follows a `,` or a `:`, and every
    container opens with a bracket (a string that holds these only counts for more)."""
    return 1 + sum(body.count(mark) for mark in (b",", b":", b"[", b"{"))


def _too_many(what: str, most: int) -> SourceError:
    return SourceError(
        f"{what}: more than {most} listed ({how_to_raise('max_versions')})",
        SourceReason.TOO_LARGE,
    )
