"""Which resources the cluster serves: apiVersion + kind -> plural and scope.

Uses aggregated discovery (GA since Kubernetes 1.30): two requests describe the whole cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gitopsd.cluster.api import Api
from gitopsd.objects import GroupKind, Resource, group_of

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
MISS_REFRESH_SECONDS = 10.0
"""A lookup that misses re-reads discovery when it is older than this: a long-running
daemon sees CRDs that others installed, without a discovery storm from one bad manifest."""


@dataclass
class Discovery:
    """A cached map of served resources; `refresh()` re-reads it (e.g. after a CRD appears),
    and so does a lookup that misses once the map is older than MISS_REFRESH_SECONDS."""

    api: Api
    _by_version_kind: dict[tuple[str, str], Resource] = field(default_factory=dict)
    _preferred: dict[GroupKind, Resource] = field(default_factory=dict)
    _loaded_at: float | None = None
    failed_groups: frozenset[str] = frozenset()
    """Groups whose discovery failed when last read (an aggregated APIService that is not
    available): their kinds are not served until it recovers."""
    _version: str | None = None

    def refresh(self) -> None:
        by_version_kind: dict[tuple[str, str], Resource] = {}
        preferred: dict[GroupKind, Resource] = {}
        failed: set[str] = set()
        for path in ("/api", "/apis"):
            for group in self.api.request("GET", path, accept=AGGREGATED).get("items") or []:
                _add_group(group, by_version_kind, preferred, failed)
        self._by_version_kind, self._preferred = by_version_kind, preferred
        self.failed_groups = frozenset(failed)
        self._loaded_at = time.monotonic()

    def find(self, api_version: str, kind: str) -> Resource | None:
        """The resource for apiVersion/kind, or None when the cluster does not serve it."""
        self._load(missing=(api_version, kind) not in self._by_version_kind)
        return self._by_version_kind.get((api_version, kind))

    @property
    def loaded_at(self) -> float | None:
        """When the map was last read (monotonic seconds; None: not yet): what it says may
        have moved only since then."""
        return self._loaded_at

    def preferred(self, group_kind: GroupKind) -> Resource | None:
        """The served version the cluster prefers for a group/kind, if any."""
        self._load(missing=group_kind not in self._preferred)
        return self._preferred.get(group_kind)

    def served_versions(self, api_version: str, kind: str) -> list[str]:
        """Every apiVersion the cluster serves for the kind of `api_version`'s group."""
        self._load(missing=False)
        group = group_of(api_version)
        return sorted(v for (v, k) in self._by_version_kind if k == kind and group_of(v) == group)

    def resources(self) -> list[Resource]:
        """Every kind served, in each version served."""
        self._load(missing=False)
        return list(self._by_version_kind.values())

    def api_versions(self) -> tuple[str, ...]:
        """Every group/version served, and every group/version/kind (as helm's
        `.Capabilities.APIVersions` holds them), sorted."""
        self._load(missing=False)
        versions = {api_version for api_version, _ in self._by_version_kind}
        kinds = {f"{api_version}/{kind}" for api_version, kind in self._by_version_kind}
        return tuple(sorted(versions | kinds))

    def kubernetes_version(self) -> str:
        """The server's version (`v1.34.4`), read once."""
        if self._version is None:
            self._version = str(self.api.request("GET", "/version").get("gitVersion", ""))
        return self._version

    def _load(self, missing: bool) -> None:
        loaded_at = self._loaded_at
        stale = loaded_at is None or time.monotonic() - loaded_at > MISS_REFRESH_SECONDS
        if loaded_at is None or (missing and stale):
            self.refresh()


def _add_group(
    group: dict[str, Any],
    by_version_kind: dict[tuple[str, str], Resource],
    preferred: dict[GroupKind, Resource],
    failed: set[str],
) -> None:
    """Adds the group's resources; versions come in preference order. A version whose
    freshness is Stale could not be discovered (v1.34 lists it without resources, or with
    the last ones known, which its server may no longer answer): none of it is served."""
    name = str((group.get("metadata") or {}).get("name", ""))
    for version in group.get("versions") or []:
        if version.get("freshness") == "Stale":
            failed.add(name)
            continue
        for entry in version.get("resources") or []:
            resource = _resource(name, version["version"], entry)
            if resource is None:
                continue
            by_version_kind[(resource.api_version, resource.kind)] = resource
            preferred.setdefault(GroupKind(name, resource.kind), resource)


def _resource(group: str, version: str, entry: dict[str, Any]) -> Resource | None:
    kind = (entry.get("responseKind") or {}).get("kind")
    if not kind or "/" in str(entry.get("resource", "")):
        return None
    return Resource(
        group=group,
        version=version,
        kind=str(kind),
        plural=str(entry["resource"]),
        namespaced=entry.get("scope") == "Namespaced",
    )
