"""An OCI artifact of manifests as a revision, as Flux's OCIRepository reads one: the
artifact a tag, the highest tag a semver range allows, or a digest names in the registry
at an oci:// URL, checked against its digests and unpacked into the cache.

`flux push artifact` stores a directory as one layer, a gzipped tar of media type
`application/vnd.cncf.flux.content.v1.tar+gzip`, unpacked at the artifact's root. Other
artifacts are read as `oras pull` reads them: each layer titled
(`org.opencontainers.image.title`) is a file of that name, or, marked
`io.deis.oras.content.unpack`, a gzipped tar of a directory of that name. The revision is
`TAG@sha256:DIGEST` (the manifest's digest; a digest alone for an artifact named by one),
so a tag moved to other content is a new revision. The registry is hostile input as a
chart's is: the same requests, credentials, bounds and digest checks (`registry`), and
the same unpacking (`gitopsd.archives`: no link, no path out of it, no archive bomb).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsd import archives
from gitopsd.config import SourceSpec
from gitopsd.errors import ConfigError, ManifestError, ManifestReason, SourceError, SourceReason
from gitopsd.source.chart_cache import CHARTS, Reading
from gitopsd.source.charts import check_repository_url, credentials_masked
from gitopsd.source.policy import FLAG_ALLOWS_INSECURE, mask_url
from gitopsd.source.registry import CHART_CONFIG, DIGEST, Registry
from gitopsd.source.releases import created_at, highest_version
from gitopsd.source.revision import Revision
from gitopsd.source.unpacking import unpack_into, write_files
from gitopsd.versions import Range, parse_range

FLUX_CONTENT = "application/vnd.cncf.flux.content.v1.tar+gzip"
TITLE = "org.opencontainers.image.title"
UNPACK = "io.deis.oras.content.unpack"
CREATED = "org.opencontainers.image.created"
LATEST = "latest"
"""The tag read when the source names none (its ref is git's default, HEAD), as Flux's."""
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
"""A tag, as the OCI distribution spec spells one: a range needs an operator no tag holds."""


@dataclass(frozen=True)
class Reference:
    """What the source's ref names: a tag, a range of tags, or a digest."""

    tag: str | None = None
    versions: Range | None = None
    digest: str | None = None

    @classmethod
    def of(cls, ref: str) -> Reference:
        """`@sha256:HEX` (or `sha256:HEX`) a digest, a tag as the spec spells one, else a
        semver range (`^1.2`, `>=1.0.0 <2`, `*`); HEAD, git's default, is `latest`."""
        if ref == "HEAD":
            return cls(tag=LATEST)
        named = DIGEST.match(ref.removeprefix("@"))
        if named:
            return cls(digest=named.group(1))
        if _TAG.match(ref):
            return cls(tag=ref)
        try:
            return cls(versions=parse_range(ref))
        except ConfigError as error:
            raise ConfigError(
                f"ref {ref!r}: neither a tag, a semver range nor @sha256:DIGEST ({error})"
            ) from None


def check_artifact_source(spec: SourceSpec, allowed_by: str = FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError unless the source names a registry gitopsd may fetch from (as a
    chart's) and a ref it can read."""
    check_repository_url(spec, "OCI artifact", allowed_by)
    Reference.of(spec.ref)


def fetch_artifact(spec: SourceSpec, cache_dir: Path, reading: Reading | None = None) -> Revision:
    """The artifact the source's ref names, unpacked in the cache, as a revision (held for
    the source by `reading`, the daemon's, as a chart is). Raises ConfigError for a refused
    source, ManifestError for contents over the source's limits, SourceError otherwise."""
    with credentials_masked(spec):
        check_artifact_source(spec)
        return _fetch_artifact(spec, cache_dir, reading)


def _fetch_artifact(spec: SourceSpec, cache_dir: Path, reading: Reading | None) -> Revision:
    registry = Registry(spec)
    tag, manifest, digest = _resolved(registry, Reference.of(spec.ref))
    directory = cache_dir / CHARTS / digest
    if reading is not None:
        reading.take(directory)
    if not directory.is_dir():  # a manifest read with the source's credentials first, always
        what = f"{registry.shown}: {tag or digest}"
        layers = _layers(manifest, what)
        budget = archives.Budget(spec.limits.max_revision_bytes, spec.limits.max_entries)
        unpack_into(directory, what, lambda work: _write(registry, layers, budget, work))
    if reading is not None:
        reading.charge(directory)
    annotations = manifest.get("annotations")
    created = annotations.get(CREATED) if isinstance(annotations, dict) else None
    return Revision(
        sha=f"{tag}@sha256:{digest}" if tag else f"sha256:{digest}",
        commit_time=created_at(created),
        url=mask_url(spec.url),
        directory=directory,
    )


def _resolved(registry: Registry, reference: Reference) -> tuple[str | None, dict[str, Any], str]:
    """(the tag read, if any; its manifest; the manifest's digest)."""
    if reference.digest is not None:
        return None, *registry.manifest(f"sha256:{reference.digest}")
    tag = reference.tag or _highest(registry, reference.versions)
    manifest, digest = registry.manifest(tag)
    return tag, manifest, digest


def _highest(registry: Registry, versions: Range | None) -> str:
    assert versions is not None  # noqa: S101 - a reference names one of the three
    tags = {tag.replace("_", "+"): tag for tag in registry.tags()}  # as helm spells "+"
    best = highest_version(tags, versions)
    if best is None:
        raise SourceError(
            f"{registry.shown}: no tag matches {versions.text!r}", SourceReason.REF_MISSING
        )
    return best


@dataclass(frozen=True)
class _Layer:
    digest: str
    name: str
    """Where it goes: "" for the root (a Flux layer), else the path its title gives."""
    unpack: bool


def _layers(manifest: dict[str, Any], what: str) -> list[_Layer]:
    """The layers to read: the Flux content layer, else every titled layer (ORAS's)."""
    config = manifest.get("config")
    if isinstance(config, dict) and config.get("mediaType") == CHART_CONFIG:
        raise SourceError(f"{what}: a Helm chart, not an artifact of manifests: name it as a chart")
    listed = [layer for layer in manifest.get("layers") or [] if isinstance(layer, dict)]
    flux = [layer for layer in listed if layer.get("mediaType") == FLUX_CONTENT]
    if flux:
        return [_Layer(_digest(flux[0], what), "", unpack=True)]
    titled = [layer for layer in listed if _title(layer)]
    if not titled:
        raise SourceError(
            f"{what}: holds neither a Flux content layer ({FLUX_CONTENT}) nor files (layers "
            f"titled {TITLE}, as oras pushes them)"
        )
    return [
        _Layer(_digest(layer, what), _path(_title(layer), what), _unpacked(layer))
        for layer in titled
    ]


def _title(layer: dict[str, Any]) -> str:
    annotations = layer.get("annotations")
    title = annotations.get(TITLE) if isinstance(annotations, dict) else None
    return title if isinstance(title, str) else ""


def _unpacked(layer: dict[str, Any]) -> bool:
    annotations = layer.get("annotations") or {}
    return str(annotations.get(UNPACK, "")).lower() == "true"


def _digest(layer: dict[str, Any], what: str) -> str:
    found = DIGEST.match(str(layer.get("digest")))
    if found is None:
        raise SourceError(f"{what}: a layer names no sha256 digest", SourceReason.CORRUPT)
    return found.group(1)


def _path(title: str, what: str) -> str:
    """A title as a path inside the artifact: relative, never out of it."""
    normal = posixpath.normpath(title)
    if title.startswith("/") or normal in (".", "..") or normal.startswith("../"):
        raise ManifestError(
            f"{what}: layer title {title[:200]!r} points outside the artifact",
            ManifestReason.PATH_ESCAPE,
        )
    return normal


def _write(registry: Registry, layers: list[_Layer], budget: archives.Budget, work: Path) -> None:
    for layer in layers:
        what = f"{registry.shown}: layer {layer.name or layer.digest[:12]}"
        data = registry.blob(layer.digest, what)
        if layer.unpack:
            files = archives.files(data, what, budget)
            write_files(_inside(layer.name, files, what) if layer.name else files, work)
        else:
            budget.members_left -= 1
            budget.bytes_left -= len(data)
            if budget.members_left < 0:
                raise archives.too_many(what)
            if budget.bytes_left < 0:
                raise archives.too_large(what)
            write_files([(layer.name, data)], work)


def _inside(
    name: str, files: Iterator[tuple[str, bytes]], what: str
) -> Iterator[tuple[str, bytes]]:
    """The files of an ORAS directory layer, whose paths begin with its title, as oras
    pulls them: under that directory, never beside it."""
    for path, contents in files:
        if not path.startswith(f"{name}/"):
            raise ManifestError(
                f"{what}: member {path[:200]!r} lies outside the directory {name!r} it unpacks",
                ManifestReason.PATH_ESCAPE,
            )
        yield path, contents
