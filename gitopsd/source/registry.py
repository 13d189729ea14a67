"""An OCI registry's repository, through the OCI distribution API: its tags, a tag's or
digest's manifest (checked against its digest) and blobs. A Helm chart is one: its tags
are its versions, and each tag's manifest names the chart archive as a layer, by digest
(as `helm push` stores a chart); an OCI artifact of manifests is another (`artifacts`)."""

from __future__ import annotations

import hashlib
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
DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
_MAX_TAG_PAGES = 50
_ENVELOPE = 16
"""Values of a tags page or manifest besides its items: its name, keys, annotations."""
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class Registry:
    """The repository at the path of the source's oci:// URL (with `helm.chart`, the chart
    of that name under it); plain HTTP only where insecure sources are allowed (as helm's
    --plain-http)."""

    def __init__(self, spec: SourceSpec) -> None:
        parts = urlsplit(spec.url)
        host = parts.hostname or ""
        authority = f"[{host}]" if ":" in host else host
        authority += f":{parts.port}" if parts.port else ""
        self.spec = spec
        self.base = f"{'http' if spec.allow_insecure else 'https'}://{authority}"
        self.name = "/".join(part for part in (parts.path.strip("/"), spec.helm.chart) if part)
        self.downloads = Downloads(spec, self.base)
        chart = f"/{spec.helm.chart}" if spec.helm.chart else ""
        self.shown = f"registry {mask_url(spec.url)}{chart}"

    def release(self) -> Release:
        """The highest version the range allows, its archive's digest read from its manifest."""
        offered = [
            Release(tag.replace("_", "+"), self._url("manifests", tag), "") for tag in self.tags()
        ]
        if not offered:
            raise SourceError(f"{self.shown}: no tags", SourceReason.REF_MISSING)
        chosen = highest(offered, self.spec)
        return self._resolved(chosen)

    def archive(self, release: Release) -> bytes:
        shown = release.shown(self.spec)
        return self.downloads.get(release.url, shown, checked_later=True).body

    def manifest(self, reference: str) -> tuple[dict[str, Any], str]:
        """The image manifest a tag or a digest (sha256:HEX) names, and its digest (hex),
        the sha256 of its bytes: refused when a digest named it and they differ."""
        what = f"{self.shown}: {reference}"
        manifest, digest = self._manifest(self._url("manifests", reference), what)
        named = DIGEST.match(reference)
        if named and named.group(1) != digest:
            raise SourceError(
                f"{what}: the manifest's sha256 is not its digest", SourceReason.CORRUPT
            )
        return manifest, digest

    def _manifest(self, url: str, what: str) -> tuple[dict[str, Any], str]:
        answer = self.downloads.get(url, what, accept=MANIFEST, bound="max_listing_bytes")
        digest = hashlib.sha256(answer.body).hexdigest()
        return _json(answer.body, what, self.spec.limits.max_versions), digest

    def blob(self, digest: str, what: str) -> bytes:
        """The blob of `digest` (hex), refused unless its sha256 is that digest."""
        url = self._url("blobs", f"sha256:{digest}")
        data = self.downloads.get(url, what, checked_later=True).body
        if hashlib.sha256(data).hexdigest() != digest:
            raise SourceError(
                f"{what}: the blob's sha256 is not the digest its manifest gives",
                SourceReason.CORRUPT,
            )
        return data

    def tags(self) -> list[str]:
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
        return [tag for tag in tags if isinstance(tag, str)]

    def _resolved(self, chosen: Release) -> Release:
        what = f"{self.shown}: {chosen.text}"
        manifest, _ = self._manifest(chosen.url, what)
        config = manifest.get("config")
        if not isinstance(config, dict) or config.get("mediaType") != CHART_CONFIG:
            raise SourceError(f"{what}: not a Helm chart (its config is not {CHART_CONFIG})")
        layers = [
            layer
            for layer in manifest.get("layers") or []
            if isinstance(layer, dict) and layer.get("mediaType") == CHART_LAYER
        ]
        digest = DIGEST.match(str(layers[0].get("digest"))) if len(layers) == 1 else None
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
