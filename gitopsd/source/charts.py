"""A chart of a Helm chart repository or an OCI registry, as a revision: picked by version
range, fetched, checked against its digest and unpacked into the cache.

Each fetch asks the repository which versions it has (a chart repository's `index.yaml`,
`chart_index`; a registry's tags, `registry`), picks the highest the source's range allows
(`releases`), and names the revision `VERSION@sha256:DIGEST` (the archive's digest), so
status, metrics and the daemon's "new revision?" test treat a new chart version (or a
version published again with other bytes) as they treat a commit. An archive is
downloaded once per digest, refused unless its sha256 is that digest, and unpacked under
the cache directory as a stream bounded by the revision's limits (`gitopsd.archives`: no
link, no path out of it, no archive bomb); the chart is then read in place like a
directory source.

The repository is hostile input like a git host: the URL passes the same allow-list
(https or oci; plain HTTP only where insecure sources are allowed), and every request is
bounded and stays with the host configured (`download`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from gitopsd import archives
from gitopsd.config import SourceSpec
from gitopsd.errors import ConfigError, GitopsdError, ManifestError, SourceError, SourceReason
from gitopsd.masking import redact
from gitopsd.source.chart_cache import CHARTS, Reading
from gitopsd.source.chart_index import ChartIndex
from gitopsd.source.credentials import read_password, secret_forms
from gitopsd.source.policy import FLAG_ALLOWS_INSECURE, check_url, mask_url, url_scheme
from gitopsd.source.registry import Registry
from gitopsd.source.revision import Revision
from gitopsd.source.unpacking import unpack_into, write_files
from gitopsd.versions import parse_range

OCI = "oci://"


def check_chart_source(spec: SourceSpec, allowed_by: str = FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError unless the source names a chart repository gitopsd may fetch
    from (https or oci; http or plain-HTTP oci only where `allowed_by` holds) and a
    version range it can read."""
    check_repository_url(spec, "chart repository", allowed_by)
    if spec.ref != "HEAD":
        raise ConfigError("a chart source has no ref: its helm version range picks the chart")
    parse_range(spec.helm.version)


def check_repository_url(spec: SourceSpec, kind: str, allowed_by: str) -> None:
    """Raises ConfigError unless the URL is one gitopsd may fetch a `kind` from: https or
    oci (http or plain-HTTP oci only where `allowed_by` holds), with a valid port."""
    registry = spec.url.lower().startswith(OCI)
    url = "https://" + spec.url[len(OCI) :] if registry else spec.url
    as_web = replace(spec, url=url, ref="HEAD")  # a registry's ref is no git ref
    if url_scheme(as_web.url) not in ("https", "http"):
        raise ConfigError(
            f"{kind} {mask_url(spec.url)}: a {kind}'s URL is https:// "
            "or oci:// (http:// where insecure sources are allowed)"
        )
    check_url(as_web, allowed_by)
    try:
        port = urlsplit(as_web.url).port  # read: urllib raises for a port that is none
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"{kind} {mask_url(spec.url)}: not a valid port")


def fetch_chart(
    spec: SourceSpec,
    cache_dir: Path,
    budget: archives.Budget | None = None,
    reading: Reading | None = None,
) -> Revision:
    """The chart version the source's range picks, unpacked in the cache, as a revision.
    `budget`: what the charts of one revision (a chart's dependencies) may unpack to
    together, a chart found in the cache charged too (it is copied for each render); by
    default the source's own limits. `reading`: the daemon's record of who holds which
    chart, and its bounds. Raises ConfigError for a refused source, ManifestError for a
    chart over its budget, SourceError for everything else."""
    with credentials_masked(spec):
        return _fetch_chart(spec, cache_dir, budget, reading)


@contextmanager
def credentials_masked(spec: SourceSpec) -> Iterator[None]:
    """The repository names its archives, versions and token service itself, and may name
    them with the credentials it was sent (an archive URL built with them): every spelling
    of them is *** in an error of the fetch, as in git's (`credentials.secret_forms`)."""
    password = read_password(spec.credentials)
    try:
        yield
    except GitopsdError as error:
        if password:
            forms = secret_forms(spec.credentials.username, password)
            error.args = (redact(str(error), forms),)
        raise


def _fetch_chart(
    spec: SourceSpec, cache_dir: Path, budget: archives.Budget | None, reading: Reading | None
) -> Revision:
    check_chart_source(spec)
    repository = Registry(spec) if spec.url.lower().startswith(OCI) else ChartIndex(spec)
    release = repository.release()
    directory = cache_dir / CHARTS / release.digest
    if reading is not None:
        reading.take(directory)
    rel = f"{spec.helm.chart}-{release.text}.tgz"
    if directory.is_dir() and budget is not None:
        _charge(directory, rel, budget)
    elif not directory.is_dir():
        data = repository.archive(release)
        if hashlib.sha256(data).hexdigest() != release.digest:
            raise SourceError(
                f"{release.shown(spec)}: the archive's sha256 is not the digest the "
                "repository gives",
                SourceReason.CORRUPT,
            )
        limits = spec.limits
        budget = budget or archives.Budget(limits.max_revision_bytes, limits.max_entries)
        _unpack(data, rel, budget, directory)
    if reading is not None:
        reading.charge(directory)
    return Revision(
        sha=f"{release.text}@sha256:{release.digest}",
        commit_time=release.created,
        url=mask_url(spec.url),
        directory=directory,
    )


def _charge(directory: Path, rel: str, budget: archives.Budget) -> None:
    """Spends the budget on a chart unpacked before: its files and their bytes."""
    for path in directory.rglob("*"):
        budget.members_left -= 1
        budget.bytes_left -= path.lstat().st_size if path.is_file() else 0
    if budget.members_left < 0:
        raise archives.too_many(rel)
    if budget.bytes_left < 0:
        raise archives.too_large(rel)


def _unpack(data: bytes, rel: str, budget: archives.Budget, directory: Path) -> None:
    """The archive's chart, its top directory stripped (`unpacking`)."""
    unpack_into(directory, rel, lambda work: write_files(_chart_files(data, rel, budget), work))


def _chart_files(data: bytes, rel: str, budget: archives.Budget) -> Iterator[tuple[str, bytes]]:
    top = None
    for name, contents in archives.files(data, rel, budget):
        first, _, inner = name.partition("/")
        if top is None:
            top = first
        if first != top or not inner:
            raise ManifestError(f"{rel}: a chart archive holds one directory, the chart's")
        yield inner, contents
    if top is None:
        raise ManifestError(f"{rel}: the archive is empty")
