"""The schemas a cluster publishes: its OpenAPI v3 documents, one per group-version.

GET /openapi/v3 lists the group-versions, each with the URL of its document (which carries
a hash, so a cache may keep it); only the documents asked for are read.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from gitopsd.cluster.api import Api
from gitopsd.objects import Body


def documents(api: Api, api_versions: Iterable[str]) -> dict[str, Body]:
    """The OpenAPI v3 document of each of `api_versions` the cluster publishes one of."""
    listed = api.request("GET", "/openapi/v3").get("paths") or {}
    found = {}
    for api_version in sorted(set(api_versions)):
        entry = listed.get(_listed_as(api_version)) or {}
        url = urlsplit(str(entry.get("serverRelativeURL", "")))
        if url.path:
            found[api_version] = api.request("GET", url.path, query=parse_qsl(url.query))
    return found


def _listed_as(api_version: str) -> str:
    """`api/v1` for the core group, `apis/apps/v1` for the others."""
    return f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"
