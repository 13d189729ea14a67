"""A chart from a Helm chart repository, as a revision: picked by version range, fetched,
checked against its digest and unpacked into the cache.

A chart repository is a web server holding `index.yaml` (every chart's versions, each with
its archive's URLs and sha256 digest) and the archives. Each fetch reads the index, picks
the highest version the source's range allows, and names the revision
`VERSION@sha256:DIGEST`, so status, metrics and the daemon's "new revision?" test treat a
new chart version (or a version published again with other bytes) as they treat a commit.
An archive is downloaded once per digest and unpacked under the cache directory as a
stream bounded by the revision's limits (`gitopsd.archives`: no link, no path out of it,
no archive bomb); the chart is then read in place like a directory source.

The chart repository is hostile input like a git host: the URL passes the same allow-list
(https, or http:// only where insecure sources are allowed), nothing is fetched from any
other scheme, host or port (an archive URL or a redirect elsewhere is refused: credentials
and requests stay with the host configured), every response is bounded (the index and
the archive by the revision's byte limit), a digest that does not match refuses the
archive, and no credential appears in an error.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import yaml

from gitopsd import archives
from gitopsd.config import SourceSpec, how_to_raise
from gitopsd.errors import ConfigError, ManifestError, SourceError, SourceReason
from gitopsd.source.credentials import read_password
from gitopsd.source.policy import FLAG_ALLOWS_INSECURE, check_url, mask_url, url_scheme
from gitopsd.source.revision import Revision
from gitopsd.versions import Version, parse_range, parse_version

INDEX = "index.yaml"
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_CREATED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$")
_CACHE = "charts"


@dataclass(frozen=True)
class Release:
    """One version of the chart as the index lists it."""

    version: Version
    text: str
    url: str
    digest: str
    created: float | None


def check_chart_source(spec: SourceSpec, allowed_by: str = FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError unless the source names a chart repository gitopsd may fetch
    from (https; http only where `allowed_by` holds) and a version range it can read."""
    if url_scheme(spec.url) not in ("https", "http"):
        raise ConfigError(
            f"chart repository {mask_url(spec.url)}: a chart repository's URL is https:// "
            "(http:// where insecure sources are allowed)"
        )
    check_url(spec, allowed_by)
    if spec.ref != "HEAD":
        raise ConfigError("a chart source has no ref: its helm version range picks the chart")
    parse_range(spec.helm.version)


def fetch_chart(spec: SourceSpec, cache_dir: Path) -> Revision:
    """The chart version the source's range picks, unpacked in the cache, as a revision."""
    repository = _Repository(spec)
    release = pick(repository.index(), spec)
    directory = cache_dir / _CACHE / release.digest
    if not directory.is_dir():
        _unpack(repository.archive(release), release, spec, directory)
    return Revision(
        sha=f"{release.text}@sha256:{release.digest}",
        commit_time=release.created,
        url=mask_url(spec.url),
        directory=directory,
    )


def pick(index: dict[Any, Any], spec: SourceSpec) -> Release:
    """The highest version of the chart the range allows, from the parsed index."""
    name, wanted = spec.helm.chart or "", spec.helm.version
    entries = index.get("entries") if isinstance(index, dict) else None
    versions = entries.get(name) if isinstance(entries, dict) else None
    if not isinstance(versions, list) or not versions:
        raise SourceError(
            f"chart repository {mask_url(spec.url)} has no chart {name!r}", SourceReason.REF_MISSING
        )
    releases = {release.version.key(): release for release in _releases(versions, spec)}
    best = parse_range(wanted).highest(release.version for release in releases.values())
    if best is None:
        raise SourceError(
            f"chart repository {mask_url(spec.url)}: no version of {name!r} matches {wanted!r}",
            SourceReason.REF_MISSING,
        )
    return releases[best.key()]


def _releases(versions: list[Any], spec: SourceSpec) -> Iterator[Release]:
    """The index's entries that name a version, a URL and a digest (others are skipped)."""
    for entry in versions:
        if not isinstance(entry, dict):
            continue
        text, urls, digest = entry.get("version"), entry.get("urls"), entry.get("digest")
        version = parse_version(text) if isinstance(text, str) else None
        if version is None or not isinstance(urls, list) or not urls:
            continue
        if not isinstance(urls[0], str) or not isinstance(digest, str):
            continue
        if not _DIGEST.match(digest):
            continue
        url = urljoin(spec.url.rstrip("/") + "/", urls[0])
        yield Release(version, str(text), url, digest, _created(entry.get("created")))


def _created(value: Any) -> float | None:
    match = _CREATED.match(str(value)) if value else None
    if match is None:
        return None
    return datetime.fromisoformat(match.group(1) + match.group(2)).timestamp()


class _Repository:
    """Requests to the one chart repository a source names, bounded, with its credentials."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self.origin = _origin(spec.url)
        self.limit = spec.limits.max_revision_bytes
        password = read_password(spec.credentials)
        self.secrets = (password,) if password else ()
        self.authorization = (
            "Basic " + base64.b64encode(f"{spec.credentials.username}:{password}".encode()).decode()
            if password
            else None
        )
        self.opener = urllib.request.build_opener(_SameOrigin(self.origin))

    def index(self) -> dict[Any, Any]:
        url = urljoin(self.spec.url.rstrip("/") + "/", INDEX)
        data = self._get(url, f"chart repository {mask_url(self.spec.url)}: {INDEX}")
        try:
            parsed = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise SourceError(
                f"chart repository {mask_url(self.spec.url)}: {INDEX}{where}: not YAML",
                SourceReason.CORRUPT,
            ) from None
        return parsed if isinstance(parsed, dict) else {}

    def archive(self, release: Release) -> bytes:
        what = f"chart {self.spec.helm.chart} {release.text} ({mask_url(release.url)})"
        if _origin(release.url) != self.origin:
            raise SourceError(
                f"{what}: the archive is on another host than the chart repository; gitopsd "
                "fetches only from the repository's own scheme, host and port",
                SourceReason.REF_MISSING,
            )
        data = self._get(release.url, what)
        if hashlib.sha256(data).hexdigest() != release.digest:
            raise SourceError(
                f"{what}: the archive's sha256 is not the digest {INDEX} gives",
                SourceReason.CORRUPT,
            )
        return data

    def _get(self, url: str, what: str) -> bytes:
        request = urllib.request.Request(url, headers={"User-Agent": "gitopsd"})  # noqa: S310 - scheme checked
        if self.authorization:
            request.add_unredirected_header("Authorization", self.authorization)
        try:
            with self.opener.open(request, timeout=self.spec.timeout_seconds) as response:
                data: bytes = response.read(self.limit + 1)
        except urllib.error.HTTPError as error:
            raise _http_error(what, error.code) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            cause = getattr(error, "reason", None) or error
            raise SourceError(f"{what}: {self._scrub(str(cause))}", _reason(cause)) from None
        if len(data) > self.limit:
            limit = how_to_raise("max_revision_bytes")
            raise SourceError(
                f"{what}: larger than the per-revision limit ({limit})", SourceReason.TOO_LARGE
            )
        return data

    def _scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return mask_url(text)


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the repository's own scheme, host and port."""

    def __init__(self, origin: tuple[str, str]) -> None:
        self.origin = origin

    def redirect_request(  # type: ignore[no-untyped-def]
        self, req, fp, code, msg, headers, newurl
    ) -> urllib.request.Request | None:
        if _origin(newurl) != self.origin:
            raise urllib.error.HTTPError(newurl, 310, "redirect to another host", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "") + f":{parts.port or ''}"


def _http_error(what: str, code: int) -> SourceError:
    if code == 310:
        return SourceError(
            f"{what}: redirected to another host; gitopsd fetches only from the chart "
            "repository's own scheme, host and port",
            SourceReason.REF_MISSING,
        )
    if code in (401, 403):
        return SourceError(f"{what}: HTTP {code}: check the credentials", SourceReason.AUTH)
    if code == 404:
        return SourceError(f"{what}: HTTP 404: not found", SourceReason.REF_MISSING)
    return SourceError(f"{what}: HTTP {code}", SourceReason.UNREACHABLE)


def _reason(cause: object) -> SourceReason:
    return SourceReason.TIMEOUT if "timed out" in str(cause) else SourceReason.UNREACHABLE


def _unpack(data: bytes, release: Release, spec: SourceSpec, directory: Path) -> None:
    """The archive's chart, its top directory stripped, written into a private directory
    that is renamed into place whole (a reader never sees half a chart)."""
    rel = f"{spec.helm.chart}-{release.text}.tgz"
    budget = archives.Budget(spec.limits.max_revision_bytes, spec.limits.max_entries)
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=directory.parent))
    try:
        _write(archives.files(data, rel, budget), rel, work)
        work.replace(directory)
    except OSError as error:
        if not directory.is_dir():  # else another fetch of the same digest won the rename
            cause = f"{rel}: cannot unpack: {error.strerror}"
            raise SourceError(cause, SourceReason.NOSPACE) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write(files: Iterator[tuple[str, bytes]], rel: str, work: Path) -> None:
    top = None
    for name, contents in files:
        first, _, inner = name.partition("/")
        if top is None:
            top = first
        if first != top or not inner:
            raise ManifestError(f"{rel}: a chart archive holds one directory, the chart's")
        target = work / inner
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(contents)
    if top is None:
        raise ManifestError(f"{rel}: the archive is empty")
